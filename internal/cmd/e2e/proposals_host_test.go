package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProposalsDecidedOnTheHost: an assist agent's edit under
// edits = "propose" is a proposal; code in the container asks Neovim to
// accept it (`:StemAccept` through --remote-expr and --remote-send, then
// :wall). The request reaches the plugin (the control: it names the host
// command), yet the file on the host is unchanged and `stemctl proposals`
// still lists it open. The student's `stemctl proposals accept` on a
// terminal applies it, the audit log names that terminal, and the same
// save from the container then writes the line to the file. Rootful
// and rootless (the container's commands as the student).
func TestProposalsDecidedOnTheHost(t *testing.T) {
	for _, mode := range podmanModes {
		t.Run(mode, func(t *testing.T) { proposalFlow(t, modeAccount(t, mode)) })
	}
}

func proposalFlow(t *testing.T, a *account) {
	const inst = "native-amd64-demo-hello-t1"
	const canary = "/* stem-canary-proposed */"
	card := filepath.Join(a.WS, "demo", "hello")
	toml := filepath.Join(card, "stem.toml")
	orig, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(toml, append(orig, "\n[defaults.agents]\nmax_level = \"assist\"\nedits = \"propose\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	words := filepath.Join(card, "t1", "words.c")
	before, err := os.ReadFile(words)
	if err != nil {
		t.Fatal(err)
	}

	a.must(0, "mcp", "call", "--level", "assist", "--instance", inst, "nvim_open", "path=t1/words.c")
	var made struct {
		Edited   bool   `json:"edited"`
		State    string `json:"state"`
		Proposal string `json:"proposal"`
	}
	out := a.must(0, "mcp", "call", "--level", "assist", "--instance", inst, "nvim_buffer_edit",
		"path=t1/words.c", "start=1", "end=0", `lines:=["`+canary+`"]`).Stdout
	if err := json.Unmarshal([]byte(out), &made); err != nil || made.Edited || made.State != "pending" || made.Proposal == "" {
		t.Fatalf("nvim_buffer_edit under propose: %v %s", err, out)
	}
	id := openProposal(t, a, inst)
	if id != made.Proposal {
		t.Fatalf("stemctl proposals lists %q, the agent was told %q", id, made.Proposal)
	}

	var st struct {
		Record struct {
			SocketDir   string `json:"socket_dir"`
			ContainerID string `json:"container_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	nsock := st.Record.SocketDir + "/n.sock"
	remote := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		full := append([]string{"exec", st.Record.ContainerID, "nvim", "--server", nsock}, args...)
		out, err := a.host(ctx, "podman", full...).CombinedOutput()
		if err != nil {
			t.Fatalf("nvim %v in the container: %v %s", args, err, out)
		}
		return string(out)
	}
	hint := "stemctl proposals accept " + id
	// The control for each path: the request reached the plugin, which
	// names the host command.
	if out := remote("--remote-expr", `execute("StemAccept `+id+`")`); !strings.Contains(out, hint) {
		t.Fatalf("control: --remote-expr StemAccept did not reach the plugin: %q", out)
	}
	hints := func() int { return strings.Count(remote("--remote-expr", `execute("messages")`), hint) }
	seen := hints()
	remote("--remote-send", "<Esc>:StemAccept "+id+"<CR>")
	waitFor(t, 20*time.Second, "--remote-send StemAccept reached the plugin", func() bool { return hints() > seen })
	// Whatever the buffer holds is saved, as the container can.
	remote("--remote-send", "<Esc>:silent! wall<CR>")
	waitFor(t, 20*time.Second, "the editor saved", func() bool {
		return strings.TrimSpace(remote("--remote-expr", `getbufvar(bufnr("words.c"), "&modified")`)) == "0"
	})

	if now, err := os.ReadFile(words); err != nil || !bytes.Equal(now, before) {
		t.Fatalf("words.c on the host changed without the student (%v):\n%s", err, now)
	}
	if got := openProposal(t, a, inst); got != id {
		t.Fatalf("after the container's accept, the open proposal is %q, want %s", got, id)
	}
	for _, e := range auditEvents(t, a, "proposal_decision") {
		t.Fatalf("a decision in the audit log: %s", e)
	}

	// The control: the student accepts on the host, at a terminal.
	shown := answerOnTerminal(t, a.Account, "y", "proposals", "accept", id, "--instance", inst)
	if !strings.Contains(shown, canary) || !strings.Contains(shown, id+" ") || !strings.Contains(shown, "accepted") {
		t.Fatalf("stemctl proposals accept:\n%s", shown)
	}
	buf := remote("--remote-expr", `join(getbufline(bufnr("words.c"), 1, 1), "")`)
	if strings.TrimSpace(buf) != canary {
		t.Fatalf("the accepted line is not in the editor's buffer: %q", buf)
	}
	if got := openProposal(t, a, inst); got != "" {
		t.Fatalf("still open after the student's accept: %s", got)
	}
	// The same save from the container now writes the line: the check on
	// the file above would have seen an accept made in the editor.
	remote("--remote-send", "<Esc>:silent! wall<CR>")
	waitFor(t, 20*time.Second, "the accepted line saved to the host's file", func() bool {
		now, _ := os.ReadFile(words)
		return strings.HasPrefix(string(now), canary+"\n") && bytes.Equal(now[len(canary)+1:], before)
	})
	ds := auditEvents(t, a, "proposal_decision")
	if len(ds) != 1 || !strings.Contains(ds[0], id+" ") || !strings.Contains(ds[0], "accepted by the student at stemctl proposals on /dev/pts/") {
		t.Fatalf("proposal_decision entries %q", ds)
	}
}

// openProposal is the id of the instance's one pending proposal, "" when
// none is pending.
func openProposal(t *testing.T, a *account, inst string) string {
	t.Helper()
	var ps []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	out := a.must(0, "proposals", inst, "--json").Stdout
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("proposals --json: %v %s", err, out)
	}
	switch {
	case len(ps) == 0:
		return ""
	case len(ps) == 1 && ps[0].State == "pending":
		return ps[0].ID
	}
	t.Fatalf("proposals: %s", out)
	return ""
}

// auditEvents are the details of the account's audit entries of event.
func auditEvents(t *testing.T, a *account, event string) []string {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(a.Base, "state", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var e struct{ Event, Detail string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Event == event {
			out = append(out, e.Detail)
		}
	}
	return out
}
