package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An agent's nvim_open loads the file beside the student's work: the
// buffer the student is typing in, unsaved, stays current in their window
// with its text, nothing is saved, and the agent reads the opened file by
// its path. The control shows the file in the window as an open used to,
// and the same view check sees the student's buffer pushed out.
func TestOpenLeavesTheStudentsView(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	editor := st.pane("edit")
	words := filepath.Join(in.Resolved.TaskDir, "words.c")
	onDisk, err := os.ReadFile(words)
	if err != nil {
		t.Fatal(err)
	}
	// The student opens words.c and types a line, without saving.
	st.typeInNvim(":edit words.c") // nvim runs in the task directory
	in.Tmux(t, "send-keys", "-t", editor, "g", "g", "O")
	in.Tmux(t, "send-keys", "-t", editor, "-l", "/* the student types here */")
	in.Tmux(t, "send-keys", "-t", editor, "Escape")
	st.waitPane(editor, `/\* the student types here \*/`, 10*time.Second)
	waitUntil(t, 10*time.Second, "Normal mode after Escape", func() bool { return st.nvimMode() == "n" })

	type view struct {
		Name     string   `msgpack:"name"`
		Modified bool     `msgpack:"modified"`
		Lines    []string `msgpack:"lines"`
		Wins     int      `msgpack:"wins"`
		Tabs     int      `msgpack:"tabs"`
		Mode     string   `msgpack:"mode"`
	}
	look := func() view {
		t.Helper()
		var v view
		st.lua(&v, `local b = vim.api.nvim_get_current_buf()
return {name = vim.api.nvim_buf_get_name(b), modified = vim.bo[b].modified,
  lines = vim.api.nvim_buf_get_lines(b, 0, 2, true), wins = #vim.api.nvim_list_wins(),
  tabs = #vim.api.nvim_list_tabpages(), mode = vim.api.nvim_get_mode().mode}`)
		return v
	}
	before := look()
	if before.Name != words || !before.Modified || before.Lines[0] != "/* the student types here */" || before.Mode != "n" {
		t.Fatalf("the student's buffer before the open: %+v", before)
	}

	s := connect(t, in, "assist")
	out := s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
	buf := num(get(out, "opened", "buffer"))
	after := look()
	if after.Name != before.Name || !after.Modified || strings.Join(after.Lines, "\n") != strings.Join(before.Lines, "\n") ||
		after.Wins != before.Wins || after.Tabs != before.Tabs || after.Mode != "n" {
		t.Fatalf("nvim_open changed the student's view: %+v, was %+v", after, before)
	}
	st.waitPane(editor, `/\* the student types here \*/`, 10*time.Second)
	if data, _ := os.ReadFile(words); string(data) != string(onDisk) {
		t.Fatalf("nvim_open saved the student's unsaved words.c:\n%s", data)
	}
	// The agent has the file, and the student finds it among the buffers.
	rd := s.ok("nvim_buffer_read", map[string]any{"path": "t1/hello.c", "start": 1, "end": 1})
	if l := readLines(t, rd); len(l) != 1 || l[0].Text != "#include <stdio.h>" {
		t.Fatalf("nvim_buffer_read of the opened file: %v", rd)
	}
	var listed bool
	st.lua(&listed, `return vim.bo[...].buflisted and vim.api.nvim_buf_is_loaded(...)`, buf)
	if !listed {
		t.Fatalf("the opened buffer %d is not loaded and listed", buf)
	}

	// Control: shown in the student's window, as an open used to do.
	st.lua(nil, `vim.api.nvim_win_set_buf(0, ...)`, buf)
	if v := look(); v.Name == words {
		t.Fatalf("control: showing buffer %d left words.c current, so the check above proves nothing: %+v", buf, v)
	}
}
