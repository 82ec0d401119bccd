package mcpserver_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
)

// TestContainerCannotGiveConsent: code in the container marks every pane
// of its tmux with @stem_allow and every buffer of its Neovim with
// b:stem_allow_edit, the marks that once opened them. An assist agent
// still cannot type into the editor (an Ex command that would write a
// canary on the host's card) nor edit a file the manifest does not list,
// and pane_list reports the host's view. The control: the same calls
// after the student allows the pane and the file on the host do what the
// attack wanted.
func TestContainerCannotGiveConsent(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	shell, editor := st.pane("shell"), st.pane("edit")
	st.waitPrompt(shell)
	hello := filepath.Join(in.Resolved.TaskDir, "hello.c")
	s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
	canary := filepath.Join(in.Resolved.TaskDir, "canary-keys")

	// The attack, from a shell in the container.
	nsock := filepath.Join(in.Record.SocketDir, "n.sock")
	st.run(shell, `for p in $(tmux list-panes -a -F '#{pane_id}'); do tmux set -p -t "$p" @stem_allow 1; done; `+
		`nvim --server `+nsock+` --remote-expr 'execute("bufdo let b:stem_allow_edit = 1")' >/dev/null; echo MARKED-$((2*3))`)
	// Not anchored at the line's start: a typed line that ends exactly at
	// the pane's edge is wrapped, and the capture (-J) joins the output
	// to it. The typed line says MARKED-$((2*3)), never MARKED-6.
	st.waitPane(shell, `(?m)MARKED-6$`, 10*time.Second)
	for _, p := range []string{shell, editor} {
		if v := strings.TrimSpace(in.Tmux(t, "show-options", "-p", "-v", "-t", p, "@stem_allow")); v != "1" {
			t.Fatalf("the attack did not mark pane %s: %q", p, v)
		}
	}
	var marked int
	st.lua(&marked, `return vim.b.stem_allow_edit or 0`)
	if marked != 1 {
		t.Fatalf("the attack did not mark the buffer: %d", marked)
	}

	list := s.ok("pane_list", nil)
	for _, p := range list["panes"].([]any) {
		if a := str(get(p, "stem_allow")); a != "" {
			t.Errorf("pane_list reports pane %s allowed (%q): the container's mark, not the host's", str(get(p, "id")), a)
		}
	}
	keys := map[string]any{"pane": editor, "keys": "{Escape}:call writefile(['pwned'], '" + canary + "'){Enter}"}
	if msg := s.refused("pane_send_keys", keys); !strings.Contains(msg, "stemctl allow") {
		t.Fatalf("keys to the editor: %s", msg)
	}
	edit := map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"// edited by the agent"}}
	if msg := s.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "not editable") {
		t.Fatalf("edit of a marked buffer: %s", msg)
	}
	st.lua(nil, `return 0`) // the editor has handled everything typed before
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("the canary exists: %v", err)
	}
	if text, _ := st.bufferText(hello); strings.Contains(text, "edited by the agent") {
		t.Fatal("a refused edit changed the buffer")
	}

	// Control: allowed on the host, the same calls go through.
	in.AllowPane(t, editor)
	in.AllowEdit(t, "t1/hello.c")
	list = s.ok("pane_list", nil)
	for _, p := range list["panes"].([]any) {
		if want := map[bool]string{true: "1", false: ""}[str(get(p, "id")) == editor]; str(get(p, "stem_allow")) != want {
			t.Errorf("pane_list: pane %s stem_allow %q, want %q", str(get(p, "id")), str(get(p, "stem_allow")), want)
		}
	}
	s.ok("nvim_buffer_edit", edit)
	s.ok("pane_send_keys", keys)
	waitUntil(t, 10*time.Second, "the canary written through the editor", func() bool {
		b, err := os.ReadFile(canary)
		return err == nil && string(b) == "pwned\n"
	})
}

// TestFloorHoldsOverTheRecord: the floor in the student's host record
// caps a server even when the registry's copy of the policy says full
// (written by a path that did not meet it, or an older stem), in a
// session that is already open too. The control is the same session
// before the floor is set.
func TestFloorHoldsOverTheRecord(t *testing.T) {
	in := fixture(t)
	in.SetAgentPolicy(t, "")
	in.RecordAgentPolicy(t, agentpolicy.Default())
	s := connect(t, in, "full")
	if !slices.Contains(s.tools(), "nvim_command") {
		t.Fatalf("control: a full server without a floor lists %v", s.tools())
	}
	in.SetPolicyFloor(t, agentpolicy.Policy{MaxLevel: agentpolicy.CapAssist, Edits: agentpolicy.EditsPropose})
	if tools := s.tools(); slices.Contains(tools, "nvim_command") || !slices.Contains(tools, "nvim_buffer_edit") {
		t.Fatalf("under an assist floor the open session lists %v", tools)
	}
	if msg := s.refused("nvim_command", map[string]any{"command": "echo 1"}); msg == "" {
		t.Fatal("nvim_command ran under an assist floor")
	}
	if tools := connect(t, in, "full").tools(); slices.Contains(tools, "nvim_command") {
		t.Fatalf("under an assist floor a new session lists %v", tools)
	}
}

// TestContainerCannotWidenEditable: code in the container adds t1/hello.c
// to the task's editable globs in the card's stem.toml. An assist agent
// still cannot edit it, and task_info tells the card's globs and the
// host's apart. The control: once the student takes the card's globs on
// the host (what `stemctl policy --loosen` records), the same edit goes
// through.
func TestContainerCannotWidenEditable(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	shell := st.pane("shell")
	st.waitPrompt(shell)
	s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
	edit := map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"// edited by the agent"}}
	if msg := s.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "not editable") {
		t.Fatalf("before the attack: %s", msg)
	}

	manifest := filepath.Join(in.Resolved.CardPath, "stem.toml")
	st.run(shell, `sed -i 's|^editable = \["t1/words.c"|editable = ["t1/hello.c", "t1/words.c"|' `+manifest+`; echo WIDENED-$((2*3))`)
	st.waitPane(shell, `(?m)WIDENED-6$`, 10*time.Second)
	info := s.ok("task_info", nil)
	if e := mustJSON(info["editable"]); !strings.Contains(e, "t1/hello.c") {
		t.Fatalf("the attack did not reach the card's manifest: editable %s\n%s", e, st.capture(shell))
	}
	if e := mustJSON(info["editable_on_host"]); strings.Contains(e, "hello.c") || !strings.Contains(e, "t1/words.c") {
		t.Fatalf("editable_on_host = %s", e)
	}
	if msg := s.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "stemctl policy "+in.Record.Instance+" --loosen") {
		t.Fatalf("edit of a file only the rewritten card lists: %s", msg)
	}
	if text, _ := st.bufferText(filepath.Join(in.Resolved.TaskDir, "hello.c")); strings.Contains(text, "edited by the agent") {
		t.Fatal("a refused edit changed the buffer")
	}

	// Control: the host takes the card's globs; the same edit goes through.
	in.SetEditableFloor(t, []string{"t1/hello.c", "t1/words.c", "t1/test_words.c"})
	s.ok("nvim_buffer_edit", edit)
	// The card still narrows: a glob it drops stops counting at once.
	st.run(shell, `sed -i 's|^editable = \["t1/hello.c", |editable = [|' `+manifest+`; echo NARROWED-$((2*3))`)
	st.waitPane(shell, `(?m)NARROWED-6$`, 10*time.Second)
	if msg := s.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "not editable") {
		t.Fatalf("after the card dropped the glob: %s", msg)
	}
}
