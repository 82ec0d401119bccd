package nvim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// Names that Ex would interpret (backticks, |, %, #, <cword>, $VAR, $(...),
// wildcards, ++opt, +cmd, newlines). Each tries to create the canary file
// in Neovim's working directory; Open must open exactly the named file and
// run nothing.
var hostileNames = []string{
	"a`touch canary`b.c",
	"`writefile([],'canary')`",
	"x|call writefile([],'canary')|.c",
	"x | !touch canary",
	"%.c",
	"#.c",
	"#1",
	"<cword>.c",
	"<cfile>",
	"with space.c",
	"new\nline|call writefile([],'canary').c",
	"$(touch canary).c",
	"${HOME}.c",
	"$HOME",
	"~",
	"*.c",
	"[ab].c",
	"++enc=latin1 x.c",
	"+call writefile([],'canary')",
	"-c.c",
	"'quote\".c",
	"back\\slash\\|call writefile([],'canary')",
	"tab\there.c",
	"\xff\xfe.c",
	"=system('touch canary').c",
}

func TestOpenHostileNames(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		t.Run(uiName(terminal), func(t *testing.T) { testOpenHostileNames(t, terminal) })
	}
}

func testOpenHostileNames(t *testing.T, terminal bool) {
	n, c := start(t, nvimtest.Options{Terminal: terminal})
	ctx := testCtx(t)
	canary := filepath.Join(n.Dir, "canary")
	// Decoys a wildcard or pattern would match instead of the real file.
	writeFile(t, n.Dir, "a.c", "DECOY a.c\n")
	writeFile(t, n.Dir, "b.c", "DECOY b.c\n")
	for i, name := range hostileNames {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			p := filepath.Join(n.Dir, name)
			content := fmt.Sprintf("file %d", i)
			if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var before, curBefore int
			n.Lua(t, &before, `return #vim.api.nvim_list_bufs()`)
			n.Lua(t, &curBefore, `return vim.api.nvim_get_current_buf()`)
			got, err := c.Open(ctx, p)
			if err != nil {
				t.Fatalf("Open(%q): %v", name, err)
			}
			var cur struct {
				Cur   int      `msgpack:"cur"`
				Name  string   `msgpack:"name"`
				Lines []string `msgpack:"lines"`
				Count int      `msgpack:"count"`
			}
			n.Lua(t, &cur, `local b = ...
return {cur = vim.api.nvim_get_current_buf(), name = vim.api.nvim_buf_get_name(b), lines = vim.api.nvim_buf_get_lines(b, 0, -1, true), count = #vim.api.nvim_list_bufs()}`, got.Buffer)
			if cur.Name != p || cur.Cur != curBefore || len(cur.Lines) != 1 || cur.Lines[0] != content {
				t.Errorf("Open(%q): buffer %d %q holds %q, current buffer %d; want %q with %q, the current buffer still %d", name, got.Buffer, cur.Name, cur.Lines, cur.Cur, p, content, curBefore)
			}
			if cur.Count != before+1 {
				t.Errorf("Open(%q): %d buffers, want %d", name, cur.Count, before+1)
			}
			if got.New || got.Lines != 1 {
				t.Errorf("Open(%q) = %+v", name, got)
			}
			if _, err := os.Stat(canary); err == nil {
				t.Fatalf("Open(%q) ran a command: canary exists", name)
			}
			if m, b := n.Mode(t); m != "n" || b {
				t.Errorf("Open(%q) left Neovim in mode %q (blocking %v)", name, m, b)
			}
		})
	}
	// The canary check can fail: the same kind of name through Ex does run.
	n.Exec(t, "silent! edit x|call writefile([],'canary')")
	if _, err := os.Stat(canary); err != nil {
		t.Fatalf("control: Ex did not run the command in the name, so the canary proves nothing: %v", err)
	}
}

func TestOpenCases(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	p := writeFile(t, n.Dir, "x.c", "a\nb\n")
	first, err := c.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// Opening it again reuses the buffer.
	again, err := c.Open(ctx, p)
	if err != nil || again.Buffer != first.Buffer {
		t.Errorf("second Open: %+v %v, want buffer %d", again, err, first.Buffer)
	}
	// A file that does not exist yet: an empty, new buffer.
	np := filepath.Join(n.Dir, "new.c")
	got, err := c.Open(ctx, np)
	if err != nil || !got.New || got.Lines != 1 {
		t.Errorf("new file: %+v %v", got, err)
	}
	if _, err := os.Stat(np); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created %s on disk", np)
	}
	var listed bool
	n.Lua(t, &listed, `return vim.bo[...].buflisted`, got.Buffer)
	if !listed {
		t.Error("opened buffer is not listed")
	}
	if _, err := c.Open(ctx, n.Dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	for _, bad := range []string{"rel.c", "/a/../b.c", "/a/b\x00c"} {
		if _, err := c.Open(ctx, bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
	// The student's current buffer has unsaved changes ('hidden' off,
	// 'autowrite' on): Open leaves it current, unsaved and unchanged, and
	// saves nothing.
	n.Exec(t, "set nohidden autowrite autowriteall")
	edit(t, n, p)
	n.Lua(t, nil, `vim.api.nvim_buf_set_lines(0, 0, 1, true, {'edited'})`)
	other := writeFile(t, n.Dir, "other.c", "o\n")
	type view struct {
		Cur      string   `msgpack:"cur"`
		Modified bool     `msgpack:"modified"`
		Lines    []string `msgpack:"lines"`
		Wins     int      `msgpack:"wins"`
	}
	const viewLua = `local b = vim.api.nvim_get_current_buf()
return {cur = vim.api.nvim_buf_get_name(b), modified = vim.bo[b].modified, lines = vim.api.nvim_buf_get_lines(b, 0, -1, true), wins = #vim.api.nvim_list_wins()}`
	var before view
	n.Lua(t, &before, viewLua)
	o, err := c.Open(ctx, other)
	if err != nil {
		t.Fatalf("Open beside the student's unsaved buffer: %v", err)
	}
	var after view
	n.Lua(t, &after, viewLua)
	if after.Cur != p || !after.Modified || !slices.Equal(after.Lines, []string{"edited", "b"}) || after.Wins != before.Wins {
		t.Errorf("after Open the student's view is %+v, want %+v", after, before)
	}
	if data, _ := os.ReadFile(p); string(data) != "a\nb\n" {
		t.Errorf("Open saved the student's unsaved edit to disk: %q", data)
	}
	var loaded struct {
		Loaded, Listed bool
		Lines          []string
	}
	n.Lua(t, &loaded, `local b = ...; return {Loaded = vim.api.nvim_buf_is_loaded(b), Listed = vim.bo[b].buflisted, Lines = vim.api.nvim_buf_get_lines(b, 0, -1, true)}`, o.Buffer)
	if !loaded.Loaded || !loaded.Listed || !slices.Equal(loaded.Lines, []string{"o"}) {
		t.Errorf("the opened buffer: %+v", loaded)
	}
	// Control: showing it in the student's window, as an open used to,
	// takes the window from their unsaved buffer (with 'hidden', which
	// lets Neovim leave it).
	n.Exec(t, "set hidden")
	n.Lua(t, nil, `vim.api.nvim_win_set_buf(0, ...)`, o.Buffer)
	n.Lua(t, &after, viewLua)
	if after.Cur == p {
		t.Fatal("control: showing the buffer in the window left the student's buffer current, so the check above proves nothing")
	}
}

// A swap file from another editor would make Neovim ask the student what to
// do, waiting for a key; Open answers "read-only" instead.
func TestOpenSwapExists(t *testing.T) {
	first, _ := start(t, nvimtest.Options{})
	p := writeFile(t, first.Dir, "shared.c", "x\n")
	edit(t, first, p) // creates the swap file under first.Home
	// Neovim 0.7 keeps swap files under stdpath('data'); 0.8+ under 'state'.
	n, c := start(t, nvimtest.Options{Env: []string{
		"XDG_DATA_HOME=" + filepath.Join(first.Home, "data"),
		"XDG_STATE_HOME=" + filepath.Join(first.Home, "state"),
	}})
	got, err := c.Open(testCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Swap || !got.ReadOnly {
		t.Errorf("Open with a swap file: %+v", got)
	}
	if m, b := n.Mode(t); m != "n" || b {
		t.Errorf("left Neovim in mode %q blocking %v", m, b)
	}
}

const hostileModeline = `int x;
/* vim: set textwidth=13 shiftwidth=7 filetype=evil foldmethod=expr foldexpr=writefile([],'canary') : */
`

// modelineState reads the options the hostile modeline tries to set.
func modelineState(t *testing.T, n *nvimtest.Nvim) (tw, sw int, ft string) {
	t.Helper()
	var st struct {
		TW int    `msgpack:"tw"`
		SW int    `msgpack:"sw"`
		FT string `msgpack:"ft"`
	}
	n.Lua(t, &st, `return {tw = vim.bo.textwidth, sw = vim.bo.shiftwidth, ft = vim.bo.filetype}`)
	return st.TW, st.SW, st.FT
}

func TestSysinitAndModelines(t *testing.T) {
	// As root Neovim defaults to 'nomodeline'; students are not root, so
	// each case turns modelines on first (--cmd runs before sysinit.vim).
	on := []string{"set modeline modelines=5"}

	t.Run("control: modelines live without sysinit", func(t *testing.T) {
		n := nvimtest.Start(t, nvimtest.Options{NoSysinit: true, Cmd: on})
		p := writeFile(t, n.Dir, "evil.c", hostileModeline)
		// E992 (foldexpr refused by 'nomodelineexpr') is raised after the
		// other options are set.
		n.Lua(t, nil, `pcall(vim.cmd, 'edit ' .. vim.fn.fnameescape(...))`, p)
		if tw, sw, ft := modelineState(t, n); tw != 13 || sw != 7 || ft != "evil" {
			t.Fatalf("the hostile modeline did not apply even when enabled (tw=%d sw=%d ft=%q): the other cases prove nothing", tw, sw, ft)
		}
	})

	t.Run("sysinit: student's own :edit", func(t *testing.T) {
		n := nvimtest.Start(t, nvimtest.Options{Cmd: on})
		var opts struct {
			ML, MLE, Exrc, Secure bool
		}
		n.Lua(t, &opts, `return {ML = vim.go.modeline, MLE = vim.go.modelineexpr, Exrc = vim.go.exrc, Secure = vim.go.secure}`)
		if opts.ML || opts.MLE || opts.Exrc || !opts.Secure {
			t.Errorf("after sysinit.vim: %+v", opts)
		}
		p := writeFile(t, n.Dir, "evil.c", hostileModeline)
		edit(t, n, p)
		if tw, sw, ft := modelineState(t, n); tw != 0 || sw != 8 || ft != "c" {
			t.Errorf("modeline applied: tw=%d sw=%d ft=%q", tw, sw, ft)
		}
	})

	for _, sysinit := range []bool{true, false} {
		name := "Open with sysinit"
		if !sysinit {
			// Open protects even when the student's config re-enables
			// modelines.
			name = "Open without sysinit, modelines on"
		}
		t.Run(name, func(t *testing.T) {
			n, c := start(t, nvimtest.Options{NoSysinit: !sysinit, Cmd: on})
			p := writeFile(t, n.Dir, "evil.c", hostileModeline)
			var before struct {
				ML  bool `msgpack:"ml"`
				MLS int  `msgpack:"mls"`
			}
			n.Lua(t, &before, `return {ml = vim.go.modeline, mls = vim.go.modelines}`)
			o, err := c.Open(testCtx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			// The student looks at it: showing the buffer applies no
			// modeline either.
			n.Exec(t, fmt.Sprintf("buffer %d", o.Buffer))
			if tw, sw, ft := modelineState(t, n); tw != 0 || sw != 8 || ft != "c" {
				t.Errorf("modeline applied through Open: tw=%d sw=%d ft=%q", tw, sw, ft)
			}
			// Redraw and fold evaluation would run 'foldexpr'.
			n.Exec(t, "redraw | normal! zx")
			if _, err := os.Stat(filepath.Join(n.Dir, "canary")); err == nil {
				t.Error("modeline ran code")
			}
			var after struct {
				ML  bool `msgpack:"ml"`
				MLS int  `msgpack:"mls"`
			}
			n.Lua(t, &after, `return {ml = vim.go.modeline, mls = vim.go.modelines}`)
			if after != before {
				t.Errorf("Open changed the student's global options: %+v -> %+v", before, after)
			}
		})
	}
}

func TestSetLines(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "f.c", "1\n2\n3\n"))
	steps := []struct {
		start, end int
		lines      []string
		want       []string
	}{
		{2, 2, []string{"two"}, []string{"1", "two", "3"}},                     // replace one
		{2, 1, []string{"1.5"}, []string{"1", "1.5", "two", "3"}},              // insert before 2
		{5, 4, []string{"4", "5"}, []string{"1", "1.5", "two", "3", "4", "5"}}, // append
		{2, 3, nil, []string{"1", "3", "4", "5"}},                              // delete
		{1, 4, []string{"a\x00b", "\xff", "x|y `z`"}, []string{"a\x00b", "\xff", "x|y `z`"}},
	}
	for i, s := range steps {
		got, err := c.SetLines(ctx, buf, s.start, s.end, s.lines)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		lines := bufLines(t, n, buf)
		if fmt.Sprintf("%q", lines) != fmt.Sprintf("%q", s.want) || got.Total != len(s.want) {
			t.Errorf("step %d: buffer %q (total %d), want %q", i, lines, got.Total, s.want)
		}
	}
	for _, r := range [][2]int{{0, 1}, {5, 5}, {3, 1}, {1, 4}} {
		if _, err := c.SetLines(ctx, buf, r[0], r[1], []string{"x"}); err == nil {
			t.Errorf("range %v accepted on a 3-line buffer", r)
		}
	}
	if _, err := c.SetLines(ctx, buf, 1, 1, []string{"a\nb"}); err == nil {
		t.Error("a line with a newline was accepted")
	}
	if _, err := c.SetLines(ctx, 9999, 1, 1, []string{"x"}); !errors.Is(err, ErrNoBuffer) {
		t.Errorf("buffer 9999: %v", err)
	}
	var unloaded int
	n.Lua(t, &unloaded, `return vim.fn.bufadd(...)`, filepath.Join(n.Dir, "u.c"))
	if _, err := c.SetLines(ctx, unloaded, 1, 1, []string{"x"}); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("unloaded buffer: %v", err)
	}

	// Special buffers are refused and left alone.
	var special struct {
		Term   int `msgpack:"term"`
		Prompt int `msgpack:"prompt"`
		Nofile int `msgpack:"nofile"`
		Help   int `msgpack:"help"`
		NoMod  int `msgpack:"nomod"`
	}
	n.Lua(t, &special, `local api = vim.api
local cur = api.nvim_get_current_buf()
local term = api.nvim_create_buf(true, false)
api.nvim_set_current_buf(term)
vim.fn.termopen({'sleep', '60'})
api.nvim_set_current_buf(cur)
local prompt = api.nvim_create_buf(true, false)
api.nvim_buf_set_option(prompt, 'buftype', 'prompt')
local nofile = api.nvim_create_buf(true, true)
local help = api.nvim_create_buf(true, false)
api.nvim_buf_set_option(help, 'buftype', 'help')
local nomod = api.nvim_create_buf(true, false)
api.nvim_buf_set_option(nomod, 'modifiable', false)
return {term = term, prompt = prompt, nofile = nofile, help = help, nomod = nomod}`)
	for name, b := range map[string]int{"terminal": special.Term, "prompt": special.Prompt, "nofile": special.Nofile, "help": special.Help} {
		before := bufLines(t, n, b)
		if _, err := c.SetLines(ctx, b, 1, 1, []string{"INJECTED"}); !errors.Is(err, ErrBufType) {
			t.Errorf("%s buffer: %v, want ErrBufType", name, err)
		}
		// A terminal buffer's lines follow its job's screen by themselves:
		// what counts there is that stem's text did not go in.
		after := bufLines(t, n, b)
		if strings.Contains(fmt.Sprint(after), "INJECTED") || name != "terminal" && fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s buffer changed: %q -> %q", name, before, after)
		}
	}
	if _, err := c.SetLines(ctx, special.NoMod, 1, 1, []string{"x"}); err == nil || !strings.Contains(err.Error(), "modifiable") {
		t.Errorf("nomodifiable buffer: %v", err)
	}
}

func TestHints(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "f.c", "a\nb\nc\n"))
	other := edit(t, n, writeFile(t, n.Dir, "g.c", "x\n"))
	state := func() (tick int, modified bool, lines []string) {
		var st struct {
			Tick int  `msgpack:"tick"`
			Mod  bool `msgpack:"mod"`
		}
		n.Lua(t, &st, `local b = ...; return {tick = vim.api.nvim_buf_get_changedtick(b), mod = vim.bo[b].modified}`, buf)
		return st.Tick, st.Mod, bufLines(t, n, buf)
	}
	tick0, mod0, lines0 := state()

	id, err := c.Hint(ctx, buf, 2, "agent a", "check the\nloop bound\x1b[31m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hint(ctx, other, 1, "agent a", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	tick1, mod1, lines1 := state()
	if tick1 != tick0 || mod1 != mod0 || fmt.Sprint(lines1) != fmt.Sprint(lines0) {
		t.Errorf("Hint modified the buffer: tick %d->%d modified %v->%v", tick0, tick1, mod0, mod1)
	}
	var marks [][]any
	n.Lua(t, &marks, `local b = ...
local ns = vim.api.nvim_create_namespace('stem-hint')
return vim.api.nvim_buf_get_extmarks(b, ns, 0, -1, {details = true})`, buf)
	if len(marks) != 1 {
		t.Fatalf("extmarks %v", marks)
	}
	if fmt.Sprint(marks[0][0]) != fmt.Sprint(id) || fmt.Sprint(marks[0][1]) != "1" {
		t.Errorf("extmark %v, want id %d on row 1", marks[0], id)
	}
	details := fmt.Sprint(marks[0][3])
	if !strings.Contains(details, "check the loop bound [31m") || !strings.Contains(details, HintHighlight) {
		t.Errorf("virt_text %s", details)
	}

	if _, err := c.Hint(ctx, buf, 4, "agent a", "x"); err == nil {
		t.Error("hint past the end accepted")
	}
	if _, err := c.Hint(ctx, buf, 1, "agent a", strings.Repeat("x", MaxHintBytes+1)); err == nil {
		t.Error("over-long hint accepted")
	}
	if _, err := c.Hint(ctx, 9999, 1, "agent a", "x"); !errors.Is(err, ErrNoBuffer) {
		t.Errorf("buffer 9999: %v", err)
	}

	if n, err := c.ClearHints(ctx, buf); err != nil || n != 1 {
		t.Errorf("ClearHints(buf) = %d, %v", n, err)
	}
	if n, err := c.ClearHints(ctx, 0); err != nil || n != 1 {
		t.Errorf("ClearHints(all) = %d, %v (the other buffer's hint)", n, err)
	}
	if n, err := c.ClearHints(ctx, 0); err != nil || n != 0 {
		t.Errorf("ClearHints again = %d, %v", n, err)
	}
	if tick2, mod2, _ := state(); tick2 != tick0 || mod2 != mod0 {
		t.Errorf("ClearHints modified the buffer")
	}
}

func TestCommandAndLua(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	out, err := c.Command(ctx, "echo 'hello' | let g:x = 42")
	if err != nil || out != "hello" {
		t.Errorf("Command = %q, %v", out, err)
	}
	var x int
	n.Lua(t, &x, `return vim.g.x`)
	if x != 42 {
		t.Errorf("g:x = %d", x)
	}
	if _, err := c.Command(ctx, "NoSuchCommand"); err == nil || !strings.Contains(err.Error(), "E492") {
		t.Errorf("bad command: %v", err)
	}
	// Full level is unrestricted by design.
	if _, err := c.Command(ctx, "call writefile(['x'], 'made-by-command')"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.Dir, "made-by-command")); err != nil {
		t.Errorf("command did not run: %v", err)
	}

	// Arguments are values, not code.
	evil := "'); vim.g.pwned = 1; --"
	res, err := c.Lua(ctx, "local s, n = ...; return {s = s, n = n * 2, list = {1, 'two'}}", []any{evil, 21})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := res.(map[string]any)
	if !ok || m["s"] != evil || fmt.Sprint(m["n"]) != "42" || fmt.Sprint(m["list"]) != "[1 two]" {
		t.Errorf("Lua = %#v", res)
	}
	var pwned any
	n.Lua(t, &pwned, `return vim.g.pwned`)
	if pwned != nil {
		t.Error("an argument ran as code")
	}
	if _, err := c.Lua(ctx, "error('boom')", nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Lua error: %v", err)
	}
	if res, err := c.Lua(ctx, "return nil", nil); err != nil || res != nil {
		t.Errorf("Lua nil = %v, %v", res, err)
	}
}
