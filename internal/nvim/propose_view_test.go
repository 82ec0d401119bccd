package nvim

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// What the student sees of a proposal in a real Neovim: a message when it
// arrives, a header that fits the pane, and a decision on the host that
// leaves the debugger's signs where they were.

// longFixture is a proposal fixture on a 200-line file, so a proposal
// near its end is off-screen.
func longFixture(t *testing.T) *proposalFixture {
	n, c := start(t, nvimtest.Options{Plugin: true})
	var lines []string
	for i := 1; i <= 200; i++ {
		lines = append(lines, fmt.Sprintf("int v%d = %d;", i, i))
	}
	p := writeFile(t, n.Dir, "words.c", strings.Join(lines, "\n")+"\n")
	return &proposalFixture{t: t, n: n, c: c, buf: edit(t, n, p), path: p, made: map[string]madeProposal{}}
}

type view struct {
	Win     int    `msgpack:"win"`
	Buf     int    `msgpack:"buf"`
	Row     int    `msgpack:"row"`
	Col     int    `msgpack:"col"`
	Top     int    `msgpack:"top"`
	Wins    int    `msgpack:"wins"`
	Columns int    `msgpack:"columns"`
	Last    string `msgpack:"last"`
}

// look is where the student is, and the last message the editor showed.
func (f *proposalFixture) look() view {
	f.t.Helper()
	var v view
	f.n.Lua(f.t, &v, `
local c = vim.api.nvim_win_get_cursor(0)
local msgs = vim.split(vim.fn.execute('messages'), '\n', {trimempty = true})
return {win = vim.api.nvim_get_current_win(), buf = vim.api.nvim_get_current_buf(), row = c[1], col = c[2],
  top = vim.fn.line('w0'), wins = #vim.api.nvim_list_wins(), columns = vim.o.columns, last = msgs[#msgs] or ''}`)
	return v
}

func (f *proposalFixture) notBlocked(what string) {
	f.t.Helper()
	if m, b := f.n.Mode(f.t); m != "n" || b {
		f.t.Fatalf("%s left Neovim in mode %q (blocking %v): the student's next key would answer a prompt", what, m, b)
	}
}

func TestProposalAnnounced(t *testing.T) {
	f := longFixture(t)
	f.n.Exec(t, "call cursor(5, 3)")
	before := f.look()
	f.propose(150, 150, []string{"int v150 = 0;"}, "agent codex", "t1")
	after := f.look()
	f.notBlocked("the message")
	if after.Win != before.Win || after.Buf != before.Buf || after.Row != before.Row || after.Col != before.Col || after.Top != before.Top || after.Wins != before.Wins {
		t.Fatalf("the proposal moved the student: %+v, was %+v", after, before)
	}
	for _, want := range []string{"agent codex", "words.c:150", "(below)", "stemctl proposals"} {
		if !strings.Contains(after.Last, want) {
			t.Errorf("message %q lacks %q", after.Last, want)
		}
	}

	// A narrow pane: the message is shortened, never a Press ENTER prompt.
	f.n.Exec(t, "set columns=60")
	if v := f.look(); v.Columns != 60 {
		t.Fatalf("columns %d", v.Columns)
	}
	f.propose(3, 3, []string{"int v3 = 0;"}, "agent "+strings.Repeat("x", 50), "t2")
	f.notBlocked("the message at 60 columns")
	v := f.look()
	if !strings.Contains(v.Last, "words.c:3") || !strings.Contains(v.Last, "stemctl proposals") || utf8.RuneCountInString(v.Last) >= 60 {
		t.Errorf("message at 60 columns: %q (%d)", v.Last, utf8.RuneCountInString(v.Last))
	}
	if strings.Contains(v.Last, "(below)") || strings.Contains(v.Last, "(above)") {
		t.Errorf("line 3 is on screen: %q", v.Last)
	}

	// A buffer no window shows: the message says how to see it.
	f.n.Exec(t, "set columns=100")
	other := writeFile(t, f.n.Dir, "other.c", "a\nb\n")
	var ob int
	f.n.Lua(t, &ob, `local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b`, other)
	if _, err := f.c.Propose(testCtx(t), ob, 1, 1, []string{"c"}, "agent codex", "t3"); err != nil {
		t.Fatal(err)
	}
	f.notBlocked("the message for a hidden buffer")
	if v := f.look(); !strings.Contains(v.Last, fmt.Sprintf(":buffer %d", ob)) || v.Buf != before.Buf {
		t.Errorf("hidden buffer: %q, current buffer %d", v.Last, v.Buf)
	}

	// Control: the same kind of message, longer than the command line,
	// does stop Neovim at a prompt, so the checks above can fail.
	f.n.Lua(t, nil, `vim.schedule(function() vim.api.nvim_echo({{string.rep('x', 130)}}, true, {}) end)`)
	f.n.WaitMode(t, func(_ string, blocking bool) bool { return blocking })
}

// headerLines are the virtual lines of the proposal headers in buf.
func (f *proposalFixture) headerLines() []string {
	var out []string
	for _, l := range f.shownText() {
		if !strings.HasPrefix(l, "+ ") {
			out = append(out, l)
		}
	}
	return out
}

func TestProposalHeaderFits(t *testing.T) {
	f := proposeFixture(t)
	f.n.Exec(t, "set number")
	f.propose(3, 3, []string{"    int a = 10;"}, "agent codex", "t1")
	for _, cols := range []int{80, 60} {
		f.n.Exec(t, fmt.Sprintf("set columns=%d", cols))
		var room int
		f.n.Lua(t, &room, `local i = vim.fn.getwininfo(vim.api.nvim_get_current_win())[1]; return i.width - i.textoff`)
		head := f.headerLines()
		all := strings.Join(head, " ")
		for _, want := range []string{"proposal p1.1 of 1 by agent codex", "stemctl proposals accept|reject"} {
			if !strings.Contains(all, want) {
				t.Errorf("%d columns: header %q lacks %q", cols, head, want)
			}
		}
		for _, l := range head {
			if w := utf8.RuneCountInString(l); w > room {
				t.Errorf("%d columns: header line %q is %d wide, the window's text %d", cols, l, w, room)
			}
		}
		// A split window half as wide: the header follows it.
		f.n.Exec(t, "vsplit")
		f.n.Lua(t, &room, `local i = vim.fn.getwininfo(vim.api.nvim_get_current_win())[1]; return i.width - i.textoff`)
		for _, l := range f.headerLines() {
			if w := utf8.RuneCountInString(l); w > room {
				t.Errorf("%d columns split: header line %q is %d wide, the window's text %d", cols, l, w, room)
			}
		}
		f.n.Exec(t, "only")
	}
}

type placed struct {
	Name string `msgpack:"name"`
	Line int    `msgpack:"lnum"`
}

// signs are the debugger view's signs in buf.
func (f *proposalFixture) signs() []placed {
	f.t.Helper()
	var out []placed
	f.n.Lua(f.t, &out, `return vim.fn.sign_getplaced(..., {group = 'stem'})[1].signs`, f.buf)
	return out
}

// TestAcceptKeepsSigns: gdb keeps a breakpoint on a line whose text an
// accepted proposal changes; the editor keeps its sign there too.
func TestAcceptKeepsSigns(t *testing.T) {
	f := proposeFixture(t)
	// The debugger view as stem.debug feeds it: a breakpoint on line 3,
	// stopped there; and one on line 5.
	f.n.Lua(t, nil, `local path, buf = ...
local view = require('stem.view')
view.define()
view.attach({running = false, frame = {fullname = path, line = 3},
  bkpts = {[1] = {enabled = true, locs = {{file = path, line = 3}}}, [2] = {enabled = true, locs = {{file = path, line = 5}}}}})
view.refresh(buf)`, f.path, f.buf)
	want := fmt.Sprint([]placed{{"StemPCBreak", 3}, {"StemBreak", 5}})
	if got := fmt.Sprint(f.signs()); got != want {
		t.Fatalf("signs before %s, want %s", got, want)
	}
	f.propose(3, 5, []string{"    int a = 10;", "    int b = 2;", "    return a * b;"}, "agent codex", "t1")
	f.host("t1")
	if got := f.lines(); got[2] != "    int a = 10;" || got[4] != "    return a * b;" {
		t.Fatalf("not applied: %q", got)
	}
	if got := fmt.Sprint(f.signs()); got != want {
		t.Errorf("signs after accept %s, want %s", got, want)
	}
	// Control: the same change made with nvim_buf_set_lines drops them.
	f.n.Lua(t, nil, `vim.api.nvim_buf_set_lines(..., 2, 5, true, {'x', 'y', 'z'})`, f.buf)
	if got := f.signs(); len(got) != 0 {
		t.Errorf("control: signs %v survived nvim_buf_set_lines; the check above proves nothing", got)
	}
}
