package mcpserver_test

// The task's agent policy (stem.toml's agents table) against a real
// fixture: a full server, the policy written into the card while the
// session runs, and the same calls made with and without it.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/levels"
)

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func TestAgentPolicyCapsTheLocalServer(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "full")
	shell := st.pane("shell")
	st.waitPrompt(shell)
	edit := func() (map[string]any, string, error) {
		return s.call("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 0, "lines": []any{"/* agent */"}})
	}

	// Control: no policy, the full server has every tool and each call
	// below works.
	if got, want := sorted(s.tools()), sorted(levels.ToolNames(levels.Full)); !slices.Equal(got, want) {
		t.Fatalf("no policy: tools %v, want full's %v", got, want)
	}
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	if _, etext, err := edit(); err != nil || etext != "" {
		t.Fatalf("control: nvim_buffer_edit without a policy: %v %s", err, etext)
	}
	s.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "echo control-$((6*7)){Enter}"})
	st.waitPane(shell, `control-42`, 10*time.Second)
	if _, err := s.readResource("stem://pane/" + strings.TrimPrefix(shell, "%")); err != nil {
		t.Fatalf("control: pane resource: %v", err)
	}
	if p := get(s.ok("task_info", nil), "agent_policy", "max_level"); p != "full" {
		t.Fatalf("task_info without a policy: agent_policy.max_level = %v", p)
	}

	t.Run("observe", func(t *testing.T) {
		s := s.sub(t)
		in.SetAgentPolicy(t, `max_level = "observe"`)
		if got, want := sorted(s.tools()), sorted(levels.ToolNames(levels.Observe)); !slices.Equal(got, want) {
			t.Fatalf("max_level = observe on a full server: tools %v, want observe's %v", got, want)
		}
		for _, name := range []string{"nvim_buffer_edit", "pane_send_keys", "pane_run", "nvim_command", "task_action"} {
			s.refused(name, map[string]any{"pane": shell, "keys": "echo policy-leak{Enter}", "command": "echo policy-leak", "path": "t1/words.c", "start": 1, "end": 0, "lines": []any{"x"}, "action": "build"})
		}
		if strings.Contains(st.capture(shell), "policy-leak") {
			t.Fatal("a refused call typed into the shell")
		}
		s.ok("pane_capture", map[string]any{"pane": shell})
		ti := s.ok("task_info", nil)
		if get(ti, "agent_policy", "max_level") != "observe" || !strings.Contains(str(ti["policy_rules"]), "caps agents at observe") {
			t.Fatalf("task_info under observe: %v / %v", ti["agent_policy"], ti["policy_rules"])
		}
		if tools := ti["tools"].([]any); len(tools) != len(levels.ToolNames(levels.Observe)) {
			t.Fatalf("task_info lists %v", tools)
		}
		ctx, err := s.readResource("stem://context")
		if err != nil || !strings.Contains(ctx, `"max_level": "observe"`) {
			t.Fatalf("stem://context under observe: %v %.400s", err, ctx)
		}
		// Every refused call is in the audit log, with the policy as the
		// reason.
		waitUntil(t, 10*time.Second, "the refusals in the audit log", func() bool {
			es, _ := readAudit(t, in.Dirs.State)
			return slices.ContainsFunc(es, func(e audit.Entry) bool {
				return e.Event == audit.Refused && e.Tool == "pane_run" && strings.Contains(e.Detail, `max_level = "observe"`)
			})
		})
	})

	t.Run("none", func(t *testing.T) {
		s := s.sub(t)
		in.SetAgentPolicy(t, `max_level = "none"`)
		if got := s.tools(); !slices.Equal(got, []string{"task_info"}) {
			t.Fatalf("max_level = none: tools %v, want only task_info", got)
		}
		for _, name := range []string{"pane_capture", "nvim_buffer_read", "session_status", "session_events", "pane_list"} {
			s.refused(name, map[string]any{"pane": shell})
		}
		if _, err := s.readResource("stem://pane/" + strings.TrimPrefix(shell, "%")); err == nil || !strings.Contains(err.Error(), "none") {
			t.Fatalf("pane resource under none: %v", err)
		}
		if !strings.Contains(str(s.ok("task_info", nil)["policy_rules"]), `max_level = "none"`) {
			t.Fatal("task_info does not say the policy is none")
		}
	})

	t.Run("hints only", func(t *testing.T) {
		s := s.sub(t)
		in.SetAgentPolicy(t, "max_level = \"assist\"\nedits = \"none\"\nhints = true")
		tools := s.tools()
		if slices.Contains(tools, "nvim_buffer_edit") || slices.Contains(tools, "pane_run") || !slices.Contains(tools, "nvim_hint") {
			t.Fatalf("hints-only lab: tools %v", tools)
		}
		before, _ := st.bufferText(in.Resolved.TaskDir + "/words.c")
		if _, etext, err := edit(); err == nil && etext == "" {
			t.Fatal("nvim_buffer_edit worked under edits = none")
		}
		if after, _ := st.bufferText(in.Resolved.TaskDir + "/words.c"); after != before {
			t.Fatal("the buffer changed under edits = none")
		}
		s.ok("nvim_hint", map[string]any{"path": "t1/words.c", "line": 1, "text": "look at the loop"})
		// pane_send_keys is assist's now: keys only to panes the student
		// allowed, where the full definition typed anywhere (the control).
		msg := s.refusedWith(errcode.PaneNotAllowed, "pane_send_keys", map[string]any{"pane": shell, "keys": "echo capped-leak{Enter}"})
		if !strings.Contains(msg, "not open to assist-level keys") {
			t.Fatalf("pane_send_keys under an assist cap: %s", msg)
		}
	})

	t.Run("the container cannot loosen it", func(t *testing.T) {
		s := s.sub(t)
		// The instance was made under an exam policy; stem.toml is then
		// rewritten (from inside the container, say) without one.
		in.RecordAgentPolicy(t, agentpolicy.Policy{MaxLevel: agentpolicy.CapNone, Edits: agentpolicy.EditsDirect, Hints: true})
		in.SetAgentPolicy(t, "")
		if got := s.tools(); !slices.Equal(got, []string{"task_info"}) {
			t.Fatalf("a loosened stem.toml: tools %v, want only task_info", got)
		}
		s.refused("pane_capture", map[string]any{"pane": shell})
		// Back to no policy anywhere: everything again (the control).
		in.RecordAgentPolicy(t, agentpolicy.Default())
		if got, want := sorted(s.tools()), sorted(levels.ToolNames(levels.Full)); !slices.Equal(got, want) {
			t.Fatalf("policy removed: tools %v, want full's %v", got, want)
		}
		s.ok("pane_capture", map[string]any{"pane": shell})
	})
}

// A full server the task's policy caps at assist reads no buffer outside
// the card, as an assist server would; without the policy it does (the
// control).
func TestPolicyCappedFullKeepsToTheCard(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "full")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("OUTSIDE-THE-CARD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf int
	st.lua(&buf, `vim.cmd('edit ' .. vim.fn.fnameescape(...)); return vim.api.nvim_get_current_buf()`, outside)
	read := map[string]any{"buffer": buf}
	if out := s.ok("nvim_buffer_read", read); !strings.Contains(mustJSON(out), "OUTSIDE-THE-CARD") {
		t.Fatalf("control: the full server without a policy does not read the buffer: %v", out)
	}
	in.SetAgentPolicy(t, "max_level = \"assist\"")
	if msg := s.refusedWith(errcode.OutsideCard, "nvim_buffer_read", read); !strings.Contains(msg, "outside the card repository") || strings.Contains(msg, "OUTSIDE-THE-CARD") {
		t.Fatalf("a full server capped at assist read a buffer outside the card: %s", msg)
	}
}
