package nvim

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// TestSnapshot: the lines come back exactly as the buffer holds them,
// escape sequences and invalid UTF-8 included (they are hashed, never
// shown), and a buffer over the budget is said to be too large.
func TestSnapshot(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	p := writeFile(t, n.Dir, "s.c", "int a;\n\x1b[31mred\x1b[0m\n\xff\xfe\ttab\n\nlast\n")
	buf := edit(t, n, p)
	s, err := c.Snapshot(ctx, buf, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Neovim read the file as latin1 (not UTF-8): the buffer holds it
	// converted, and that is what a snapshot has.
	want := bufLines(t, n, buf)
	if len(want) != 5 || want[1] != "\x1b[31mred\x1b[0m" {
		t.Fatalf("the buffer holds %q", want)
	}
	if !slices.Equal(s.Lines, want) || s.TooLarge || s.Buffer != buf {
		t.Fatalf("snapshot %q (too large %v), want %q", s.Lines, s.TooLarge, want)
	}
	if s2, err := c.Snapshot(ctx, buf, 10); err != nil || !s2.TooLarge || s2.Lines != nil {
		t.Fatalf("over the budget: %+v %v", s2, err)
	}
}

// TestSetLinesAt: the edit lands only while the tick is the one given.
func TestSetLinesAt(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "t.c", "one\ntwo\n"))
	s, err := c.Snapshot(ctx, buf, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The student types first.
	n.Lua(t, nil, `vim.api.nvim_buf_set_lines(..., 0, 0, true, {'student'})`, buf)
	_, err = c.SetLinesAt(ctx, buf, s.Tick, 1, 1, []string{"agent"})
	if !errors.Is(err, ErrTickChanged) {
		t.Fatalf("stale tick: %v", err)
	}
	if got := bufLines(t, n, buf); strings.Join(got, ",") != "student,one,two" {
		t.Fatalf("a refused edit changed the buffer: %q", got)
	}
	// Control: with the current tick the same edit is made.
	s, err = c.Snapshot(ctx, buf, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetLinesAt(ctx, buf, s.Tick, 1, 1, []string{"agent"}); err != nil {
		t.Fatal(err)
	}
	if got := bufLines(t, n, buf); strings.Join(got, ",") != "agent,one,two" {
		t.Fatalf("buffer %q", got)
	}
}

// TestTickAnswerWithoutTick: the student's Neovim can replace stem's
// functions; one that answers an edit made without a tick as if a tick
// had been given is an error, not a crash of stem-mcp.
func TestTickAnswerWithoutTick(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "h.c", "one\n"))
	if _, err := c.SetLines(ctx, buf, 1, 1, []string{"two"}); err != nil {
		t.Fatal(err)
	}
	n.Lua(t, nil, `for k in pairs(package.loaded._stem_rpc) do package.loaded._stem_rpc[k] = function() return {err = 'tick', tick = 7} end end`)
	if _, err := c.SetLines(ctx, buf, 1, 1, []string{"three"}); err == nil || !strings.Contains(err.Error(), "changedtick that was not given") {
		t.Fatalf("a tick answer to an edit without one: %v", err)
	}
	// Control: with a tick given, the same answer is a changed buffer.
	if _, err := c.SetLinesAt(ctx, buf, 3, 1, 1, []string{"three"}); !errors.Is(err, ErrTickChanged) {
		t.Fatalf("with a tick: %v", err)
	}
}
