package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// TestConsentOnTheHost runs the student's side with the stemctl binary,
// as root with root's Podman and as a non-root student with rootless
// Podman. Code in the container loosens stem.toml, marks every pane
// @stem_allow and makes the container exit; the student's next `up`,
// `down` + `up` and a re-creation keep the policy floor (a full nvim_command stays refused,
// a canary on the host unwritten) and an assist agent gets no keys. The
// controls: `stemctl allow` opens the pane, `stemctl policy --loosen
// --yes` the policy, and both are in the audit log with their input.
func TestConsentOnTheHost(t *testing.T) {
	bin := bins(t)
	for _, mode := range []string{"rootful", "rootless"} {
		t.Run(mode, func(t *testing.T) {
			var a *testenv.Account
			if mode == "rootless" {
				a = student.Get(t, "localhost/stem-native-amd64:latest").Account(t, bin)
			} else {
				a = testenv.NewAccount(t, bin, testenv.AccountOptions{Env: []string{"TERM=xterm"}})
			}
			consentFlow(t, a)
		})
	}
}

func consentFlow(t *testing.T, a *testenv.Account) {
	const inst = "native-amd64-demo-hello-t1"
	must := func(args ...string) string {
		t.Helper()
		r, err := a.Run(nil, args...)
		if err != nil || r.Code != 0 {
			t.Fatalf("stemctl %s: %v %d\n%s%s", strings.Join(args, " "), err, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	fails := func(want string, args ...string) {
		t.Helper()
		r, err := a.Run(nil, args...)
		if err != nil || r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, want) {
			t.Fatalf("stemctl %s: %v %d, want a failure saying %q\n%s%s", strings.Join(args, " "), err, r.Code, want, r.Stdout, r.Stderr)
		}
	}
	card := filepath.Join(a.WS, "demo", "hello")
	toml := filepath.Join(card, "stem.toml")
	orig, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	// The teacher's card: assist, proposals, approvals (the file keeps
	// its owner: the student's, rootless).
	tight := "\n[defaults.agents]\nmax_level = \"assist\"\nedits = \"propose\"\napprove = [\"task_action\"]\n"
	if err := os.WriteFile(toml, append(orig, tight...), 0o644); err != nil {
		t.Fatal(err)
	}
	must("up", "native-amd64", "demo", "hello", "1")
	canary := filepath.Join(card, "t1", "canary-ex")
	exArgs := []string{"mcp", "call", "--level", "full", "--instance", inst, "nvim_command", "command=call writefile(['pwned'], '" + canary + "')"}
	policy := func() (floor, inForce map[string]any) {
		t.Helper()
		var rep struct {
			Floor   map[string]any `json:"floor"`
			InForce map[string]any `json:"in_force"`
		}
		if err := json.Unmarshal([]byte(must("policy", inst, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Floor, rep.InForce
	}
	stillTight := func(how string) {
		t.Helper()
		floor, in := policy()
		if floor["max_level"] != "assist" || in["max_level"] != "assist" || in["edits"] != "propose" {
			t.Fatalf("%s: floor %v, in force %v", how, floor, in)
		}
		// mcp-go answers a tool the policy removed as not found.
		fails("tool 'nvim_command' not found", exArgs...)
		if _, err := os.Stat(canary); !os.IsNotExist(err) {
			t.Fatalf("%s: the canary exists (%v)", how, err)
		}
	}
	stillTight("first up")

	// From inside: stem.toml loosened, every pane marked, stem-init ended.
	must("exec", inst, "--tty", "never", "--", "sh", "-c",
		`sed -i '/^\[defaults.agents\]/,$d' `+toml+` && S=$(ls "$STEM_INSTANCE_DIR"/*/t.sock | head -n 1) && `+
			`for p in $(tmux -S "$S" list-panes -a -F '#{pane_id}'); do tmux -S "$S" set -p -t "$p" @stem_allow 1 || exit 1; done`)
	type paneList struct {
		Panes []struct {
			ID     string `json:"id"`
			Window string `json:"window_name"`
			Allow  string `json:"stem_allow"`
		} `json:"panes"`
	}
	var panes paneList
	if err := json.Unmarshal([]byte(must("mcp", "call", "--level", "observe", "--instance", inst, "pane_list")), &panes); err != nil || len(panes.Panes) == 0 {
		t.Fatalf("pane_list: %v %+v", err, panes)
	}
	editorPane := func() string {
		t.Helper()
		var l paneList
		json.Unmarshal([]byte(must("mcp", "call", "--level", "observe", "--instance", inst, "pane_list")), &l)
		for _, p := range l.Panes {
			if p.Window == "edit" {
				return p.ID
			}
		}
		t.Fatalf("no editor pane in %+v", l)
		return ""
	}
	shell := panes.Panes[len(panes.Panes)-1].ID
	for _, p := range panes.Panes {
		if p.Allow != "" {
			t.Fatalf("pane_list reports the container's mark on %s", p.ID)
		}
	}
	keys := []string{"mcp", "call", "--level", "assist", "--instance", inst, "pane_send_keys", "pane=" + shell, "keys=echo KEYS-$((6*7)){Enter}"}
	fails("stemctl allow "+inst+" "+shell, keys...)
	// Control: the student allows the pane on the host.
	must("allow", inst, shell)
	must(keys...)
	must("disallow", inst, shell)
	fails("stemctl allow", keys...)

	r, _ := a.Run(nil, "exec", inst, "--tty", "never", "--", "sh", "-c", "kill -TERM 1")
	_ = r // the exec ends with the container
	waitState(t, a, inst, "exited")
	must("up", "native-amd64", "demo", "hello", "1")
	stillTight("up after the container exited")
	// --force: the editor started again shows the swap-file message the
	// kill left, so down cannot ask it for unsaved changes.
	must("down", inst, "--timeout", "1s", "--force")
	must("up", "native-amd64", "demo", "hello", "1")
	stillTight("down + up")
	// A changed configuration (another stem-mcp) re-creates the container
	// (--force: the editor shows the swap-file message from the kill).
	mcpBin, err := os.ReadFile(filepath.Join(a.Bin, "stem-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(a.Base, "stem-mcp")
	if err := os.WriteFile(other, append(mcpBin, "changed"...), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Run([]string{"STEM_MCP_BIN=" + other}, "up", "native-amd64", "demo", "hello", "1", "--force"); err != nil || r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "re-creat") {
		t.Fatalf("up with another stem-mcp: %v %d\n%s%s", err, r.Code, r.Stdout, r.Stderr)
	}
	stillTight("re-create")

	// Without a terminal --loosen asks nobody: refused.
	fails("give --yes", "policy", inst, "--loosen")
	stillTight("--loosen without a terminal")
	// On a terminal it shows the change and asks; anything but y is no.
	if out := loosenOnTerminal(t, a, inst, "n"); !strings.Contains(out, "to   max_level=full") || !strings.Contains(out, "not loosened") {
		t.Fatalf("--loosen answered n:\n%s", out)
	}
	stillTight("--loosen answered n")
	// Control: the student loosens it on purpose.
	loosenOnTerminal(t, a, inst, "y")
	if floor, in := policy(); floor["max_level"] != "full" || in["max_level"] != "full" {
		t.Fatalf("after --loosen: floor %v, in force %v", floor, in)
	}
	// The editor came back from the kill with a message waiting for
	// Enter; the student answers it, as they would on attaching.
	for i := 0; ; i++ {
		r, err := a.Run(nil, exArgs...)
		if err == nil && r.Code == 0 {
			break
		}
		if i == 20 || !strings.Contains(r.Stderr+r.Stdout, "waiting for the student's input") {
			t.Fatalf("control: nvim_command after loosening: %v %d\n%s%s", err, r.Code, r.Stdout, r.Stderr)
		}
		must("mcp", "call", "--level", "full", "--instance", inst, "pane_send_keys", "pane="+editorPane(), "keys={Enter}")
	}
	waitFile(t, canary, "pwned\n")

	log, err := os.ReadFile(filepath.Join(a.Base, "state", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var consents, floors []string
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var e struct{ Event, Detail string }
		json.Unmarshal([]byte(line), &e)
		switch e.Event {
		case "consent":
			consents = append(consents, e.Detail)
		case "policy_floor":
			floors = append(floors, e.Detail)
		}
	}
	if len(consents) != 2 || !strings.HasPrefix(consents[0], "allow keys to pane "+shell) || !strings.Contains(consents[0], "by stemctl allow without a terminal") ||
		!strings.HasPrefix(consents[1], "disallow keys to pane "+shell) {
		t.Errorf("consent entries %q", consents)
	}
	if len(floors) != 1 || !strings.Contains(floors[0], "to max_level=full") || !strings.Contains(floors[0], "by stemctl policy --loosen on /dev/pts/") {
		t.Errorf("policy_floor entries %q", floors)
	}
}

// loosenOnTerminal runs `stemctl policy INSTANCE --loosen` on a pty,
// answers the question, and returns what the terminal showed.
func loosenOnTerminal(t *testing.T, a *testenv.Account, inst, answer string) string {
	t.Helper()
	return answerOnTerminal(t, a, answer, "policy", inst, "--loosen")
}

// answerOnTerminal runs stemctl with args on a pty, answers its [y/N]
// question, and returns what the terminal showed.
func answerOnTerminal(t *testing.T, a *testenv.Account, answer string, args ...string) string {
	t.Helper()
	what := "stemctl " + strings.Join(args, " ")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), args...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	for !strings.Contains(shown(), "[y/N]") {
		select {
		case <-done:
			t.Fatalf("%s ended without asking:\n%s", what, shown())
		case <-ctx.Done():
			t.Fatalf("no question:\n%s", shown())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := f.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, shown())
	}
	<-done
	return shown()
}

func waitState(t *testing.T, a *testenv.Account, inst, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, _ := a.Run(nil, "status", inst, "--json")
		if strings.Contains(r.Stdout, `"`+want+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %s:\n%s%s", inst, want, r.Stdout, r.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitFile(t *testing.T, p, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(p); err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q", p, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
