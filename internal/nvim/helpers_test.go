package nvim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// start runs a real Neovim (with stem's sysinit.vim and a UI attached
// unless opts say otherwise) and dials it.
func start(t *testing.T, opts nvimtest.Options) (*nvimtest.Nvim, *Client) {
	t.Helper()
	n := nvimtest.Start(t, opts)
	c, err := Dial(testCtx(t), n.Socket, Options{CallTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return n, c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// edit opens path in the student's window the way the student would
// (setup only; fnameescape keeps the name literal).
func edit(t *testing.T, n *nvimtest.Nvim, path string) int {
	t.Helper()
	var buf int
	n.Lua(t, &buf, `vim.cmd('edit ' .. vim.fn.fnameescape(...)); return vim.api.nvim_get_current_buf()`, path)
	return buf
}

func bufLines(t *testing.T, n *nvimtest.Nvim, buf int) []string {
	t.Helper()
	var lines []string
	n.Lua(t, &lines, `return vim.api.nvim_buf_get_lines(..., 0, -1, true)`, buf)
	return lines
}
