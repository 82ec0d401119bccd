package mcpserver_test

// Proposals (edits = "propose") against the fixture's real tmux and
// Neovim, with stem's editor plugin on the runtimepath as in the images.
// Two assist agents propose; the student decides by typing into the
// editor's pane through tmux; the agents try every tool they have to
// decide for themselves.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
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
	a.ok("nvim_open", map[string]any{"path": "t1/words.c"})
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
	// student types an Ex command into the editor's pane.
	student := func(cmd string) {
		t.Helper()
		in.Tmux(t, "send-keys", "-t", editor, "-l", ":"+cmd)
		in.Tmux(t, "send-keys", "-t", editor, "Enter")
	}
	wantState := func(s *session, id, state string) map[string]any {
		t.Helper()
		var out map[string]any
		waitUntil(t, 10*time.Second, id+" "+state, func() bool {
			out = status(s, id, 0)
			return str(out["state"]) == state
		})
		return out
	}

	pa := propose(a, 10, 10, "    return c == ' ' || c == '\\t' || c == '\\n';")
	t.Run("shown, buffer unchanged", func(t *testing.T) {
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("the proposal changed the buffer")
		}
		st.waitPane(editor, `proposal `+pa+`\.1 of 1 by agent a1a1a1`, 10*time.Second)
		st.waitPane(editor, `\\pa accept hunk`, 10*time.Second)
		if s := str(status(a, pa, 0)["state"]); s != "pending" {
			t.Fatalf("status %s", s)
		}
	})

	t.Run("the agent cannot accept its own proposal", func(t *testing.T) {
		// Keys into the editor: refused (the student did not allow it).
		if msg := a.refused("pane_send_keys", map[string]any{"pane": editor, "keys": ":StemAccept " + pa + "{Enter}"}); !strings.Contains(msg, "not open to assist-level keys") {
			t.Fatalf("pane_send_keys into the editor: %s", msg)
		}
		// Keys into the shell the student allowed land in bash.
		a.ok("pane_send_keys", map[string]any{"pane": shell, "keys": ":StemAccept " + pa + "{Enter}"})
		// Ex and Lua: no such tools at assist (or under this policy).
		for _, name := range []string{"nvim_command", "nvim_lua", "pane_run"} {
			a.refused(name, map[string]any{"command": "StemAccept " + pa, "code": "vim.cmd('StemAccept " + pa + "')", "pane": shell})
		}
		// Text that looks like the command, as a hint and as a proposal.
		a.ok("nvim_hint", map[string]any{"path": "t1/words.c", "line": 10, "text": ":StemAccept " + pa})
		decoy := propose(a, 11, 11, ":StemAccept "+pa, "<Cmd>StemAccept "+pa+"<CR>")
		a.ok("nvim_open", map[string]any{"path": "t1/words.c"})
		if s := str(status(a, pa, 300)["state"]); s != "pending" {
			t.Fatalf("after the agent's tries the proposal is %s", s)
		}
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("the buffer changed")
		}
		student("StemReject " + decoy)
		wantState(a, decoy, "rejected")
	})

	t.Run("accept, while the agent waits", func(t *testing.T) {
		res := a.async("proposal_status", map[string]any{"proposal": pa, "wait_ms": 30000})
		student("StemAccept " + pa)
		r := <-res
		if r.err != nil || r.etext != "" || str(r.out["state"]) != "accepted" || str(r.out["decided_by"]) != "the student, in their editor" {
			t.Fatalf("proposal_status: %v %q %v", r.err, r.etext, r.out)
		}
		want := slices.Clone(lines)
		want[9] = "    return c == ' ' || c == '\\t' || c == '\\n';"
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after accepting: %q", got[8:11])
		}
		lines = want
	})

	t.Run("two agents on one buffer, one goes stale", func(t *testing.T) {
		p1 := propose(a, 15, 15, "    int words = 0; /* a */")
		p2 := propose(b, 15, 16, "    int words = 0; /* b */", "    int in_word = 0; /* b */")
		st.waitPane(editor, `by agent b2b2b2`, 10*time.Second)
		if msg := b.refused("proposal_status", map[string]any{"proposal": p1}); !strings.Contains(msg, "not a proposal this session made") {
			t.Fatalf("b read a's proposal: %s", msg)
		}
		student("StemAccept " + p2)
		wantState(b, p2, "accepted")
		out := wantState(a, p1, "stale")
		if !strings.Contains(str(out["decided_by"]), "nobody") {
			t.Fatalf("stale: %v", out)
		}
		student("StemAccept " + p1)
		want := slices.Clone(lines)
		want[14], want[15] = "    int words = 0; /* b */", "    int in_word = 0; /* b */"
		if got := text(); !slices.Equal(got, want) {
			t.Fatalf("after the stale accept: %q", got[13:17])
		}
		lines = want
	})

	t.Run("accept one hunk, reject the rest", func(t *testing.T) {
		p := propose(a, 18, 22, lines[17]+" /* 1 */", lines[18], lines[19], lines[20], lines[21]+" /* 2 */")
		student("StemAccept " + p + ".2")
		wantState(a, p, "pending")
		// The student's key on the first hunk rejects it.
		in.Tmux(t, "send-keys", "-t", editor, "-l", ":18")
		in.Tmux(t, "send-keys", "-t", editor, "Enter")
		in.Tmux(t, "send-keys", "-t", editor, "-l", `\pR`)
		out := wantState(a, p, "partially_accepted")
		hs := out["hunks"].([]any)
		if len(hs) != 2 || str(hs[0].(map[string]any)["state"]) != "rejected" || str(hs[1].(map[string]any)["state"]) != "accepted" {
			t.Fatalf("hunks %v", hs)
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
		student("StemReject " + p)
		wantState(b, p, "rejected")
		if got := text(); !slices.Equal(got, lines) {
			t.Fatal("a rejected proposal changed the buffer")
		}
	})

	t.Run("hostile text shown inert", func(t *testing.T) {
		canary := filepath.Join(in.Dirs.Home, "proposal-canary")
		title := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", editor, "#{pane_title}"))
		p := propose(a, 3, 3,
			"\x1b]2;pwned-title\x07\x1b[2J\x1b[31mred",
			":call writefile(['x'], '"+canary+"')",
			"<Cmd>call writefile(['x'], '"+canary+"')<CR>",
			strings.Repeat("A", 200000))
		st.waitPane(editor, `\^\[\]2;pwned-title\^G`, 10*time.Second)
		if now := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", editor, "#{pane_title}")); now != title || strings.Contains(now, "pwned") {
			t.Fatalf("the proposal's escape set the pane title: %q", now)
		}
		student("StemReject " + p)
		wantState(a, p, "rejected")
		if _, err := os.Stat(canary); !os.IsNotExist(err) {
			t.Fatalf("the proposal's text ran: %v", err)
		}
	})

	t.Run("decided without asking: recorded while the session goes on, open ones at its end", func(t *testing.T) {
		c := connect(t, in, "assist", "--agent", "c3c3c3")
		p := propose(c, 1, 1, "/* c */", lines[0])
		propose(c, 12, 12, lines[11]+" /* left open */")
		student("StemAccept " + p)
		waitUntil(t, 10*time.Second, "the insertion at the top", func() bool { return text()[0] == "/* c */" })
		lines = append([]string{"/* c */"}, lines...)
		waitUntil(t, 10*time.Second, "the decision in the audit log, nobody having asked", func() bool {
			es, _ := readAudit(t, in.Dirs.State)
			return slices.ContainsFunc(es, func(e audit.Entry) bool {
				return e.Event == audit.ProposalDecision && e.Agent == "c3c3c3" && e.Result == "accepted"
			})
		})
		c.c.Close()
		waitUntil(t, 10*time.Second, "the session's end in the audit log", func() bool {
			es, _ := readAudit(t, in.Dirs.State)
			return slices.ContainsFunc(es, func(e audit.Entry) bool { return e.Event == audit.SessionEnd && e.Agent == "c3c3c3" })
		})
	})

	t.Run("audited", func(t *testing.T) {
		es, _ := readAudit(t, in.Dirs.State)
		created := map[int64]string{}
		var got []string
		for _, e := range es {
			switch e.Event {
			case audit.ProposalCreate:
				if e.Agent == "" || e.Tool != "nvim_buffer_edit" || !strings.Contains(e.Detail, "by agent "+e.Agent) {
					t.Errorf("creation without who: %+v", e)
				}
				created[e.Seq] = e.Agent
			case audit.ProposalDecision:
				if who, ok := created[e.Intent]; !ok || who != e.Agent {
					t.Errorf("decision without its creation: %+v", e)
				}
				got = append(got, e.Agent+":"+e.Result)
			}
		}
		want := []string{"a1a1a1:rejected", "a1a1a1:accepted", "b2b2b2:accepted", "a1a1a1:stale", "a1a1a1:partially_accepted", "b2b2b2:rejected", "a1a1a1:rejected", "c3c3c3:accepted", "c3c3c3:open"}
		if len(created) != 9 || !slices.Equal(got, want) {
			t.Fatalf("%d creations; decisions %v, want %v", len(created), got, want)
		}
	})

	// Saved, the file's accepted lines are their proposers' in blame (one
	// agent's hunk among another's, an insertion at the top); rejected,
	// stale and open proposals left nothing of theirs.
	t.Run("blame names the proposers", func(t *testing.T) {
		student("w")
		waitUntil(t, 10*time.Second, "words.c saved", func() bool {
			b, err := os.ReadFile(words)
			return err == nil && strings.HasPrefix(string(b), "/* c */\n")
		})
		checkBlame(t, blameOf(t, in, words), map[string]string{
			`c == ' ' || c == '\t'`: "a1a1a1",
			"/* b */":               "b2b2b2",
			" /* 2 */":              "a1a1a1",
			"/* c */":               "c3c3c3",
		})
	})

	// file_blame (for a teacher's agent) agrees with stemctl audit blame,
	// at observe, and reads nothing outside the card.
	t.Run("file_blame", func(t *testing.T) {
		o := connect(t, in, "observe")
		out := o.ok("file_blame", map[string]any{"path": "t1/words.c"})
		ranges := out["ranges"].([]any)
		next := 1
		for _, l := range blameOf(t, in, words) {
			var r map[string]any
			for _, x := range ranges {
				x := x.(map[string]any)
				if int(x["from"].(float64)) <= l.N && l.N <= int(x["to"].(float64)) {
					r = x
				}
			}
			if r == nil || str(r["by"]) != l.By || (l.Who != nil && !strings.Contains(str(r["writer"]), "agent "+l.Who.Agent+" (assist)")) {
				t.Fatalf("line %d: stemctl says %s %+v, file_blame %v", l.N, l.By, l.Who, r)
			}
			next = l.N + 1
		}
		if last := ranges[len(ranges)-1].(map[string]any); int(last["to"].(float64)) != next-1 || len(ranges) < 5 {
			t.Fatalf("ranges %v", ranges)
		}
		if msg := o.refused("file_blame", map[string]any{"path": "../../../../../../etc/passwd"}); !strings.Contains(msg, "leaves the card") {
			t.Fatalf("a path outside the card: %s", msg)
		}
	})

	t.Run("a full server capped at assist keeps to the editable files", func(t *testing.T) {
		f := connect(t, in, "full")
		f.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
		edit := map[string]any{"path": "t1/hello.c", "start": 1, "end": 0, "lines": []any{"/* full */"}}
		if msg := f.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "not editable at the assist level") {
			t.Fatalf("capped full server on a file the task does not list: %s", msg)
		}
		// Control: without the policy the full server edits it directly.
		in.SetAgentPolicy(t, "")
		if out := f.ok("nvim_buffer_edit", edit); out["edited"] == nil || out["proposal"] != nil {
			t.Fatalf("control: %v", out)
		}
	})
}
