package mcpserver_test

// Proposals (edits = "propose") against the fixture's real tmux and
// Neovim, with stem's editor plugin on the runtimepath as in the images.
// Agents propose; the student decides on the host (`stemctl proposals`,
// run in-process here); the agents and code in the container try every
// path they have to decide for the student.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/proposals"
)

func TestProposals(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell, editor := st.pane("shell"), st.pane("edit")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	in.SetAgentPolicy(t, "max_level = \"assist\"\nedits = \"propose\"")
	a := connect(t, in, "assist", "--agent", "a1a1a1")
	b := connect(t, in, "assist", "--agent", "b2b2b2")
	words := in.Resolved.TaskDir + "/words.c"
	rel, _ := filepath.Rel(in.Resolved.CardPath, words)
	a.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	// The student looks at it (an agent's open leaves their window alone).
	st.lua(nil, `vim.api.nvim_set_current_buf(vim.fn.bufnr(...))`, words)
	orig, ok := st.bufferText(words)
	if !ok {
		t.Fatal("words.c is not loaded")
	}
	lines := strings.Split(orig, "\n")
	text := func() []string { s, _ := st.bufferText(words); return strings.Split(s, "\n") }
	propose := func(s *session, start, end int, repl ...any) string {
		t.Helper()
		out := s.ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": start, "end": end, "lines": repl})
		if out["edited"] != false || str(out["state"]) != "pending" {
			t.Fatalf("nvim_buffer_edit under propose: %v", out)
		}
		return str(out["proposal"])
	}
	status := func(s *session, id string, wait int) map[string]any {
		t.Helper()
		return s.ok("proposal_status", map[string]any{"proposal": id, "wait_ms": wait})
	}
	host := func(args ...string) string {
		t.Helper()
		out, err := hostProposals(t, in, args...)
		if err != nil {
			t.Fatalf("stemctl proposals %v: %v\n%s", args, err, out)
		}
		return out
	}
	// editorInfo is what the plugin holds of id: its state and request.
	editorInfo := func(id string) (state, request string) {
		var info []struct {
			ID      string `msgpack:"id"`
			State   string `msgpack:"state"`
			Request string `msgpack:"request"`
		}
		st.lua(&info, `return require('stem.proposals').info()`)
		for _, p := range info {
			if p.ID == id {
				state, request = p.State, p.Request
			}
		}
		return state, request
	}
	// remote runs nvim --server SOCK ARGS..., as code in the container can.
	remote := func(args ...string) {
		t.Helper()
		cmd := exec.Command("nvim", append([]string{"--server", in.Dir.Nvim()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+in.Dirs.Home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nvim --server %v: %v\n%s", args, err, out)
		}
	}

	newLine10 := "    return c == ' ' || c == '\\t' || c == '\\n';"
	pa := propose(a, 10, 10, newLine10)
	t.Run("shown, buffer unchanged, on record on the host", func(t *testing.T) {
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("the proposal changed the buffer")
		}
		st.waitPane(editor, `proposal `+pa+`\.1 of 1 by agent a1a1a1`, 10*time.Second)
		st.waitPane(editor, `decide on the host: stemctl proposals`, 10*time.Second)
		if s := str(status(a, pa, 0)["state"]); s != "pending" {
			t.Fatalf("status %s", s)
		}
		r := hostRecord(t, in, pa)
		if r.State != proposals.Pending || r.From != "agent a1a1a1" || len(r.Hunks) != 1 || !slices.Equal(r.Hunks[0].Old, lines[9:10]) || r.Hunks[0].New[0] != newLine10 {
			t.Fatalf("host record %+v", r)
		}
		if out := host(); !strings.Contains(out, pa) || !strings.Contains(out, "agent a1a1a1") {
			t.Fatalf("stemctl proposals:\n%s", out)
		}
		if out := host("show", pa); !strings.Contains(out, "-"+lines[9]) || !strings.Contains(out, "+"+newLine10) {
			t.Fatalf("stemctl proposals show:\n%s", out)
		}
	})

	t.Run("the agent cannot accept its own proposal", func(t *testing.T) {
		if msg := a.refused("pane_send_keys", map[string]any{"pane": editor, "keys": ":StemAccept " + pa + "{Enter}"}); !strings.Contains(msg, "not open to assist-level keys") {
			t.Fatalf("pane_send_keys into the editor: %s", msg)
		}
		a.ok("pane_send_keys", map[string]any{"pane": shell, "keys": ":StemAccept " + pa + "{Enter}"})
		for _, name := range []string{"nvim_command", "nvim_lua", "pane_run"} {
			a.refused(name, map[string]any{"command": "StemAccept " + pa, "code": "vim.cmd('StemAccept " + pa + "')", "pane": shell})
		}
		a.ok("nvim_hint", map[string]any{"path": "t1/words.c", "line": 10, "text": ":StemAccept " + pa})
		decoy := propose(a, 11, 11, ":StemAccept "+pa, "<Cmd>StemAccept "+pa+"<CR>")
		if s := str(status(a, pa, 300)["state"]); s != "pending" {
			t.Fatalf("after the agent's tries the proposal is %s", s)
		}
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("the buffer changed")
		}
		host("reject", decoy, "--yes")
		if s := str(status(a, decoy, 0)["state"]); s != "rejected" {
			t.Fatalf("decoy %s", s)
		}
	})

	// Code in the container reaches the editor's RPC socket: each path
	// reaches the plugin (the control: a request is marked, the editor's
	// own state changes) and none accepts anything on the host.
	t.Run("the container cannot accept", func(t *testing.T) {
		steal := filepath.Join(in.Resolved.TaskDir, ".steal.lua")
		os.WriteFile(steal, []byte(`
local m = require('stem.proposals')
local S
for i = 1, 50 do
  local n, v = debug.getupvalue(m.rows, i)
  if n == 'S' then S = v end
end
local p = S.list[...]
m.settle(p.id, p.token, {'accepted'})
vim.api.nvim_buf_set_lines(p.buf, 9, 10, true, {`+"[["+newLine10+"]]"+`})
return p.state`), 0o600)
		tries := []struct {
			name    string
			args    []string
			request string
		}{
			{"--remote-send", []string{"--remote-send", "<Esc>:StemAccept " + pa + "<CR>"}, "accept"},
			{"--remote-expr", []string{"--remote-expr", `execute("StemReject ` + pa + `")`}, "reject"},
		}
		for _, try := range tries {
			// Control: a request the host may show is marked.
			remote(try.args...)
			waitUntil(t, 10*time.Second, try.name+" reached the plugin", func() bool {
				_, req := editorInfo(pa)
				return req == try.request
			})
			if got := text(); !slices.Equal(got, lines) {
				t.Fatalf("%s changed the buffer", try.name)
			}
			if r := hostRecord(t, in, pa); r.State != proposals.Pending {
				t.Fatalf("%s: the host record is %s", try.name, r.State)
			}
		}
		// The plugin's Lua called directly, with everything the editor
		// knows (the token included): the editor's state says accepted
		// (the control) and the text is in the buffer, but nothing is on
		// record as accepted.
		remote("--remote-expr", `luaeval("assert(loadfile(_A[1]))(_A[2])", ["`+steal+`", "`+pa+`"])`)
		waitUntil(t, 10*time.Second, "the Lua path reached the plugin", func() bool {
			state, _ := editorInfo(pa)
			return state == "accepted"
		})
		if got := text(); got[9] != newLine10 {
			t.Fatalf("control: the container's Lua did not write the buffer: %q", got[9])
		}
		if r := hostRecord(t, in, pa); r.State != proposals.Pending {
			t.Fatalf("the host record is %s", r.State)
		}
		if d := decisionsOf(t, in, pa); len(d) != 0 {
			t.Fatalf("decisions in the audit log: %+v", d)
		}
		if got := recordedProposals(t, in, rel); len(got) != 0 {
			t.Fatalf("provenance records %v", got)
		}
		// Put the line back as the student would (undo).
		st.lua(nil, `local l = ...; vim.api.nvim_buf_set_lines(vim.fn.bufnr(l[1]), 9, 10, true, {l[2]})`, []string{words, lines[9]})
	})

	t.Run("accept on the host, while the agent waits; signs kept", func(t *testing.T) {
		// A breakpoint-like sign on the line the proposal replaces.
		st.lua(nil, `local l = ...
vim.fn.sign_define('StemTestBreak', {text = 'B>'})
vim.fn.sign_place(77, 'stemtest', 'StemTestBreak', vim.fn.bufnr(l), {lnum = 10})`, words)
		res := a.async("proposal_status", map[string]any{"proposal": pa, "wait_ms": 30000})
		out := host("accept", pa, "--yes")
		if !strings.Contains(out, "accepted") || !strings.Contains(out, "open Neovim buffer") {
			t.Fatalf("accept: %s", out)
		}
		r := <-res
		if r.err != nil || r.etext != "" || str(r.out["state"]) != "accepted" || !strings.Contains(str(r.out["decided_by"]), "the student, at stemctl proposals --yes") {
			t.Fatalf("proposal_status: %v %q %v", r.err, r.etext, r.out)
		}
		want := slices.Clone(lines)
		want[9] = newLine10
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after accepting: %q", got[8:11])
		}
		lines = want
		var signs []struct {
			Lnum int    `msgpack:"lnum"`
			Name string `msgpack:"name"`
		}
		st.lua(&signs, `return vim.fn.sign_getplaced(vim.fn.bufnr(...), {group = 'stemtest'})[1].signs`, words)
		if len(signs) != 1 || signs[0].Lnum != 10 {
			t.Fatalf("the student's sign after the accept: %+v", signs)
		}
		d := decisionsOf(t, in, pa)
		if len(d) != 1 || d[0].Agent != "a1a1a1" || d[0].Result != "accepted" || !strings.Contains(d[0].Detail, "accepted by the student at stemctl proposals --yes") {
			t.Fatalf("audit: %+v", d)
		}
		if got := recordedProposals(t, in, rel); !slices.Equal(got, []string{pa + " the student at stemctl proposals --yes (no terminal)"}) {
			t.Fatalf("provenance: %q", got)
		}
		if _, err := hostProposals(t, in, "accept", pa, "--yes"); err == nil || !strings.Contains(err.Error(), "already decided") {
			t.Fatalf("accepting twice: %v", err)
		}
	})

	t.Run("refused without a terminal and without --yes", func(t *testing.T) {
		p := propose(b, 1, 1, "/* b */", lines[0])
		if _, err := hostProposals(t, in, "accept", p); err == nil || !strings.Contains(err.Error(), "not one") {
			t.Fatalf("accept without a terminal: %v", err)
		}
		if r := hostRecord(t, in, p); r.State != proposals.Pending {
			t.Fatalf("state %s", r.State)
		}
		host("reject", p, "--yes")
	})

	// At a Press ENTER prompt Neovim serves no ordinary call: the host
	// applies nothing and says so (a cmdline prompt, input(), is served).
	t.Run("a Neovim at a prompt: nothing applied, said so", func(t *testing.T) {
		p := propose(b, 2, 2, lines[1]+" /* prompt */")
		v := st.nvim()
		mode := func() string {
			m, err := v.Mode()
			if err != nil {
				return ""
			}
			return m.Mode
		}
		in.Tmux(t, "send-keys", "-t", editor, "-l", `:echo "one\ntwo\nthree"`)
		in.Tmux(t, "send-keys", "-t", editor, "Enter")
		waitUntil(t, 10*time.Second, "Neovim at the Press ENTER prompt", func() bool { return strings.HasPrefix(mode(), "r") })
		if out, err := hostProposals(t, in, "accept", p, "--yes"); err == nil || !strings.Contains(err.Error(), "waiting for the student's input") {
			t.Fatalf("accept at a prompt: %v\n%s", err, out)
		}
		in.Tmux(t, "send-keys", "-t", editor, "Enter")
		waitUntil(t, 10*time.Second, "Neovim back in normal mode", func() bool { return mode() == "n" })
		if got := text(); !slices.Equal(got, lines) || hostRecord(t, in, p).State != proposals.Pending {
			t.Fatal("applied at a prompt")
		}
		host("reject", p, "--yes")
	})

	t.Run("two agents on one buffer, one goes stale", func(t *testing.T) {
		p1 := propose(a, 15, 15, "    int words = 0; /* a */")
		p2 := propose(b, 15, 16, "    int words = 0; /* b */", "    int in_word = 0; /* b */")
		if msg := b.refused("proposal_status", map[string]any{"proposal": p1}); !strings.Contains(msg, "not a proposal this session made") {
			t.Fatalf("b read a's proposal: %s", msg)
		}
		host("accept", p2, "--yes")
		if out := host("accept", p1, "--yes"); !strings.Contains(out, "stale") {
			t.Fatalf("accept of changed lines: %s", out)
		}
		if s := str(status(a, p1, 0)["state"]); s != "stale" {
			t.Fatalf("p1 %s", s)
		}
		want := slices.Clone(lines)
		want[14], want[15] = "    int words = 0; /* b */", "    int in_word = 0; /* b */"
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after the stale accept: %q", got[13:17])
		}
		lines = want
	})

	t.Run("accept one hunk, reject the rest", func(t *testing.T) {
		p := propose(a, 18, 22, lines[17]+" /* 1 */", lines[18], lines[19], lines[20], lines[21]+" /* 2 */")
		host("accept", p, "--hunk", "2", "--yes")
		if s := str(status(a, p, 0)["state"]); s != "pending" {
			t.Fatalf("after one hunk: %s", s)
		}
		host("reject", p, "--yes")
		out := status(a, p, 0)
		hs := out["hunks"].([]any)
		if str(out["state"]) != "partially_accepted" || len(hs) != 2 || str(hs[0].(map[string]any)["state"]) != "rejected" || str(hs[1].(map[string]any)["state"]) != "accepted" {
			t.Fatalf("status %v", out)
		}
		want := slices.Clone(lines)
		want[21] += " /* 2 */"
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after one hunk: %q", got[16:23])
		}
		lines = want
	})

	t.Run("reject", func(t *testing.T) {
		p := propose(b, 1, 1, "#include <stdio.h>", lines[0])
		host("reject", p, "--yes")
		if s := str(status(b, p, 0)["state"]); s != "rejected" {
			t.Fatalf("state %s", s)
		}
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("a rejected proposal changed the buffer")
		}
		waitUntil(t, 10*time.Second, "the rejected proposal no longer shown", func() bool {
			return !strings.Contains(st.capture(editor), "proposal "+p+".1")
		})
	})

	// :StemAccept in the editor (here made by the container, as it can
	// be) raises a question in the host spool; only the host's answer
	// applies it.
	t.Run("a request in the editor is asked on the host", func(t *testing.T) {
		spool, err := decision.Open(in.Dirs.State, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		release, err := spool.Attend("host terminal /dev/pts/test (stemctl attach)")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		p := propose(a, 12, 12, lines[11]+" /* asked */")
		question := func() decision.Question {
			var q decision.Question
			waitUntil(t, 10*time.Second, "the question on the host", func() bool {
				qs, _ := spool.Pending()
				for _, x := range qs {
					if x.Kind == "proposal" && strings.Contains(x.Text, "accept proposal "+p+" by agent a1a1a1") {
						q = x
						return true
					}
				}
				return false
			})
			return q
		}
		remote("--remote-send", "<Esc>:StemAccept "+p+"<CR>")
		q := question()
		if got := text(); !slices.Equal(got, lines) || hostRecord(t, in, p).State != proposals.Pending {
			t.Fatal("the request alone applied the proposal")
		}
		if err := spool.Answer(decision.Answer{ID: q.ID, Choice: decision.No, Input: "host terminal /dev/pts/test (stemctl attach)", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 10*time.Second, "the request cleared after the no", func() bool { _, req := editorInfo(p); return req == "" })
		if got := text(); !slices.Equal(got, lines) || hostRecord(t, in, p).State != proposals.Pending {
			t.Fatal("a no applied the proposal")
		}
		remote("--remote-send", "<Esc>:StemAccept "+p+"<CR>")
		q = question()
		if err := spool.Answer(decision.Answer{ID: q.ID, Choice: decision.Yes, Input: "host terminal /dev/pts/test (stemctl attach)", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 10*time.Second, "the proposal accepted", func() bool { return hostRecord(t, in, p).State == proposals.Accepted })
		want := slices.Clone(lines)
		want[11] += " /* asked */"
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after the host's yes: %q", got[10:13])
		}
		lines = want
		// The record is stored before the decision is audited.
		var d []audit.Entry
		waitUntil(t, 10*time.Second, "the decision in the audit log", func() bool { d = decisionsOf(t, in, p); return len(d) > 0 })
		if len(d) != 1 || !strings.Contains(d[0].Detail, "accepted by the student at host terminal /dev/pts/test (stemctl attach)") {
			t.Fatalf("audit %+v", d)
		}
	})

	t.Run("accepted after the proposer's session ended", func(t *testing.T) {
		c := connect(t, in, "assist", "--agent", "c3c3c3")
		p := propose(c, 1, 1, "/* c */", lines[0])
		c.c.Close()
		waitUntil(t, 10*time.Second, "the session's end in the audit log", func() bool {
			es, _ := readAudit(t, in.Dirs.State)
			return slices.ContainsFunc(es, func(e audit.Entry) bool { return e.Event == audit.SessionEnd && e.Agent == "c3c3c3" })
		})
		host("accept", p, "--yes")
		if got := text(); got[0] != "/* c */" {
			t.Fatalf("first line %q", got[0])
		}
		lines = append([]string{"/* c */"}, lines...)
		if d := decisionsOf(t, in, p); len(d) != 1 || d[0].Agent != "c3c3c3" || d[0].Result != "accepted" {
			t.Fatalf("audit: %+v", d)
		}
	})

	t.Run("audited", func(t *testing.T) {
		es, _ := readAudit(t, in.Dirs.State)
		created := map[int64]string{}
		var got []string
		for _, e := range es {
			switch e.Event {
			case audit.ProposalCreate:
				created[e.Seq] = e.Agent
			case audit.ProposalDecision:
				if who, ok := created[e.Intent]; !ok || who != e.Agent || !strings.Contains(e.Detail, "by the student at stemctl proposals") && !strings.Contains(e.Detail, "by the student at host terminal") {
					t.Errorf("decision without its creation or its host input: %+v", e)
				}
				got = append(got, e.Agent+":"+e.Result)
			}
		}
		want := []string{"a1a1a1:rejected", "a1a1a1:accepted", "b2b2b2:rejected", "b2b2b2:rejected", "b2b2b2:accepted", "a1a1a1:stale", "a1a1a1:pending", "a1a1a1:partially_accepted", "b2b2b2:rejected", "a1a1a1:accepted", "c3c3c3:accepted"}
		if !slices.Equal(got, want) {
			t.Fatalf("decisions %v, want %v", got, want)
		}
	})

	// Saved, the file's accepted lines are their proposers' in blame, as
	// accepted on the host; rejected and stale proposals left nothing.
	t.Run("blame names the proposers", func(t *testing.T) {
		// Code in the container writes the text of b's rejected proposal.
		st.lua(nil, `local l = ...; vim.api.nvim_buf_set_lines(vim.fn.bufnr(l[1]), -1, -1, true, {l[2]})`, []string{words, "#include <stdio.h>"})
		lines = append(lines, "#include <stdio.h>")
		st.typeInNvim(":w")
		waitUntil(t, 10*time.Second, "words.c saved", func() bool {
			b, err := os.ReadFile(words)
			return err == nil && strings.HasPrefix(string(b), "/* c */\n")
		})
		checkBlame(t, blameOf(t, in, words), map[string]string{
			`c == ' ' || c == '\t'`: "a1a1a1",
			"/* b */":               "b2b2b2",
			" /* 2 */":              "a1a1a1",
			" /* asked */":          "a1a1a1",
			"/* c */":               "c3c3c3",
			"#include <stdio.h>":    "container",
		})
		for _, l := range blameOf(t, in, words) {
			switch {
			case l.Who != nil && !strings.HasPrefix(l.AcceptedBy, "the student at stemctl proposals --yes") && !strings.HasPrefix(l.AcceptedBy, "the student at host terminal"):
				t.Errorf("line %d by %s: accepted by %q", l.N, l.Who.Agent, l.AcceptedBy)
			case l.Text == "#include <stdio.h>" && (l.Unaccepted == nil || l.Unaccepted.ID == ""):
				t.Errorf("the container's copy of a rejected proposal: %+v", l)
			case l.Text != "#include <stdio.h>" && l.Unaccepted != nil:
				t.Errorf("line %d %q matches no unaccepted proposal: %+v", l.N, l.Text, l.Unaccepted)
			}
		}
		o := connect(t, in, "observe")
		var acc, un bool
		for _, x := range o.ok("file_blame", map[string]any{"path": "t1/words.c"})["ranges"].([]any) {
			r := x.(map[string]any)
			acc = acc || strings.HasPrefix(str(r["accepted_by"]), "the student at stemctl proposals")
			un = un || r["unaccepted_proposal"] != nil
			if str(r["by"]) == "container" && str(r["writer"]) != "written in the container (the student or their programs)" {
				t.Errorf("file_blame range %v", r)
			}
		}
		if !acc || !un {
			t.Fatalf("file_blame: accepted_by %v, unaccepted_proposal %v", acc, un)
		}
	})

	t.Run("accepted while the file is not open: written by the host", func(t *testing.T) {
		p := propose(b, 3, 3, lines[2]+" /* disk */")
		st.typeInNvim(":bwipeout")
		waitUntil(t, 10*time.Second, "words.c unloaded", func() bool { _, ok := st.bufferText(words); return !ok })
		if out := host("accept", p, "--yes"); !strings.Contains(out, "saved file") {
			t.Fatalf("accept: %s", out)
		}
		data, _ := os.ReadFile(words)
		if got := strings.Split(string(data), "\n"); got[2] != lines[2]+" /* disk */" {
			t.Fatalf("line 3 on disk: %q", got[2])
		}
		lines[2] += " /* disk */"
		checkBlame(t, blameOf(t, in, words), map[string]string{
			`c == ' ' || c == '\t'`: "a1a1a1",
			"/* b */":               "b2b2b2",
			" /* 2 */":              "a1a1a1",
			" /* asked */":          "a1a1a1",
			"/* c */":               "c3c3c3",
			"/* disk */":            "b2b2b2",
			"#include <stdio.h>":    "container",
		})
	})
}
