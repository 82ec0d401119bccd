package mcpserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
	"github.com/stem-edu/stem/internal/nvim"
)

// At assist an edit reaches only a file the task lists as editable (as
// recorded on the host) or one the student marked; never a path outside
// the card. Control: the student's mark opens a file that was refused.
func TestInProcessEditRules(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	card := h.Instance.Record.CardPath
	for _, p := range []string{"t1/words.c", "t1/hello.c"} {
		if r := h.Call("nvim_open", map[string]any{"path": p}); r.IsError {
			t.Fatalf("nvim_open %s: %s", p, r.Text)
		}
	}
	words, hello := bufferOf(t, h, filepath.Join(card, "t1/words.c")), bufferOf(t, h, filepath.Join(card, "t1/hello.c"))
	before := h.Nvim.Buffer(hello).Lines

	edit := func(p string, tick int) mcptest.Result {
		args := map[string]any{"path": p, "start": 1, "end": 1, "lines": []any{"/* edited */"}}
		if tick > 0 {
			args["expected_tick"] = tick
		}
		return h.Call("nvim_buffer_edit", args)
	}
	if r := edit("t1/words.c", 0); r.IsError {
		t.Fatalf("edit of an editable file: %s", r.Text)
	}
	if got := h.Nvim.Buffer(words).Lines[0]; got != "/* edited */" {
		t.Fatalf("the editable file's buffer has %q on line 1", got)
	}
	if r := edit("t1/hello.c", 0); r.Code != errcode.NotEditable {
		t.Fatalf("edit of a file not listed as editable: %+v", r)
	}
	if got := h.Nvim.Buffer(hello).Lines; !slices.Equal(got, before) {
		t.Fatalf("a refused edit changed the buffer: %q", got)
	}
	for _, p := range []string{"../../../../etc/passwd", "/etc/passwd", ".git/config"} {
		if r := edit(p, 0); !r.IsError || (r.Code != errcode.OutsideCard && r.Code != errcode.NotEditable && r.Code != errcode.BadInput) {
			t.Errorf("edit of %s: %+v", p, r)
		}
	}
	// A stale tick refuses the edit.
	tick := h.Nvim.Buffer(words).Tick
	if r := edit("t1/words.c", tick-1); r.Code != errcode.Stale {
		t.Errorf("edit with a stale expected_tick: %+v", r)
	}

	h.Instance.AllowEdit(t, "t1/hello.c")
	if r := edit("t1/hello.c", 0); r.IsError {
		t.Fatalf("control: the student marked hello.c on the host: %s", r.Text)
	}
	if got := h.Nvim.Buffer(hello).Lines[0]; got != "/* edited */" {
		t.Fatalf("the marked file's buffer has %q on line 1", got)
	}
}

func bufferOf(t *testing.T, h *mcptest.Harness, abs string) int {
	t.Helper()
	r := h.Call("nvim_status", nil)
	st, _ := r.Fields["status"].(map[string]any)
	bufs, _ := st["buffers"].([]any)
	for _, it := range bufs {
		b, _ := it.(map[string]any)
		if name, _ := b["name"].(map[string]any); name["text"] == abs {
			return int(b["number"].(float64))
		}
	}
	t.Fatalf("no buffer %s in %v", abs, r.Fields)
	return 0
}

// Below full a buffer outside the card cannot be read, whether named by
// number or found through nvim_status; at full it can.
func TestInProcessReadOutsideCard(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
	secret := h.Nvim.AddBuffer("/etc/shadow-like", "root:SECRET")
	own := h.Nvim.AddBuffer(filepath.Join(h.Instance.Record.CardPath, "t1/words.c"), "int words;")
	r := h.Call("nvim_buffer_read", map[string]any{"buffer": secret})
	if r.Code != errcode.OutsideCard || strings.Contains(r.Text, "SECRET") {
		t.Fatalf("read of a buffer outside the card at observe: %+v", r)
	}
	if r := h.Call("nvim_buffer_read", map[string]any{"buffer": own}); r.IsError || !strings.Contains(r.Text, "int words;") {
		t.Fatalf("control: read of a card buffer: %+v", r)
	}
	full := mcptest.New(t, mcptest.Options{Level: mcpserver.Full, Share: h})
	if r := full.Call("nvim_buffer_read", map[string]any{"buffer": secret}); r.IsError || !strings.Contains(r.Text, "SECRET") {
		t.Fatalf("control: full reads any buffer: %+v", r)
	}
}

// A file not loaded in Neovim is read from disk; a hint goes to a loaded
// buffer, within its lines.
func TestInProcessReadFromDiskAndHint(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	data, err := os.ReadFile(filepath.Join(h.Instance.Record.CardPath, "t1/words.c"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(data), "\n", 2)[0]
	r := h.Call("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1})
	if r.IsError || !strings.Contains(r.Text, first) {
		t.Fatalf("read from disk: %+v", r)
	}
	if r := h.Call("nvim_hint", map[string]any{"path": "t1/words.c", "line": 1, "text": "look here"}); r.Code != errcode.BadInput && !r.IsError {
		t.Fatalf("hint in a file that is not open: %+v", r)
	}
	h.Call("nvim_open", map[string]any{"path": "t1/words.c"})
	b := bufferOf(t, h, filepath.Join(h.Instance.Record.CardPath, "t1/words.c"))
	if r := h.Call("nvim_hint", map[string]any{"path": "t1/words.c", "line": 1, "text": "look here"}); r.IsError {
		t.Fatalf("hint: %s", r.Text)
	}
	if got := h.Nvim.Hints(b); len(got) != 1 || got[0] != "1:an AI agent (assist):look here" {
		t.Fatalf("hints shown: %q", got)
	}
	lines := len(h.Nvim.Buffer(b).Lines)
	if r := h.Call("nvim_hint", map[string]any{"path": "t1/words.c", "line": lines + 1, "text": "x"}); r.Code != errcode.BadInput {
		t.Fatalf("hint past the end: %+v", r)
	}
}

// An editor that is down fails only the tools that use it, with code
// part_down and words that name the part and the fix; the others go on.
func TestInProcessEditorDown(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
	h.Nvim.SetDown(fmt.Errorf("%w: dial: %w", nvim.ErrUnavailable, os.ErrNotExist))
	r := h.Call("nvim_status", nil)
	if r.Code != errcode.PartDown || !strings.Contains(r.Text, "Neovim is not running") || !strings.Contains(r.Text, "stemctl up") {
		t.Fatalf("nvim_status with the editor down: %+v", r)
	}
	if r := h.Call("pane_list", nil); r.IsError {
		t.Fatalf("pane_list with only the editor down: %s", r.Text)
	}
	st := h.Call("session_status", nil)
	parts, _ := st.Fields["parts"].(map[string]any)
	ed, _ := parts["editor"].(map[string]any)
	if st.IsError || ed["state"] != "down" {
		t.Fatalf("session_status with the editor down: %+v", st)
	}
	h.Nvim.SetDown(nil)
	if r := h.Call("nvim_status", nil); r.IsError {
		t.Fatalf("control: the editor back: %s", r.Text)
	}
}

// tmux going away is part_down for every tool that reaches it.
func TestInProcessTmuxDown(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
	if r := h.Call("pane_list", nil); r.IsError {
		t.Fatalf("control: pane_list: %s", r.Text)
	}
	h.Tmux.Kill()
	r := h.Call("pane_list", nil)
	if r.Code != errcode.PartDown || !strings.Contains(r.Text, "tmux") {
		t.Fatalf("pane_list with tmux gone: %+v", r)
	}
}
