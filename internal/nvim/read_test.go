package nvim

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

func TestReadBufferByNumberAndPath(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	p := writeFile(t, n.Dir, "main.c", "int main(void)\n{\n\treturn 0;\n}\n")
	buf := edit(t, n, p)

	got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Buffer != buf || got.Total != 4 || len(got.Lines()) != 4 || got.Truncated || got.Modified {
		t.Fatalf("unexpected result %+v", got)
	}
	if got.Name.S != p {
		t.Errorf("name %q, want %q", got.Name.S, p)
	}
	for i, want := range []string{"int main(void)", "{", "\treturn 0;", "}"} {
		if got.Lines()[i].N != i+1 || got.Lines()[i].S != want || got.Lines()[i].Raw != nil {
			t.Errorf("line %d = %+v, want %q", i+1, got.Lines()[i], want)
		}
	}

	// By path, a sub-range, and through a symlink to the same file.
	link := filepath.Join(t.TempDir(), "link.c")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, link} {
		got, err = c.ReadBuffer(ctx, File(path), 2, 3, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got.Buffer != buf || len(got.Lines()) != 2 || got.Lines()[0].N != 2 || got.Lines()[1].S != "\treturn 0;" {
			t.Errorf("%s: range 2..3 = %+v", path, got.Lines())
		}
	}

	// Unsaved edits are what ReadBuffer shows, and it says so.
	n.Lua(t, nil, `vim.api.nvim_buf_set_lines(..., 0, 1, true, {"int main(int argc, char **argv)"})`, buf)
	got, err = c.ReadBuffer(ctx, File(p), 1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Modified || got.Lines()[0].S != "int main(int argc, char **argv)" {
		t.Errorf("after edit: %+v", got)
	}

	// Past the end: no lines, but the total.
	got, err = c.ReadBuffer(ctx, Buf(buf), 10, 20, 0)
	if err != nil || len(got.Lines()) != 0 || got.Total != 4 {
		t.Errorf("past end: %+v, %v", got, err)
	}
}

func TestReadBufferNotLoaded(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	onDisk := writeFile(t, n.Dir, "disk.c", "x\n")
	_, err := c.ReadBuffer(ctx, File(onDisk), 1, 0, 0)
	if !errors.Is(err, ErrNotLoaded) {
		t.Errorf("file in no buffer: %v, want ErrNotLoaded", err)
	}
	// A buffer that exists but is not loaded (:badd).
	listed := writeFile(t, n.Dir, "listed.c", "y\n")
	var buf int
	n.Lua(t, &buf, `return vim.fn.bufadd(...)`, listed)
	for _, ref := range []BufferRef{File(listed), Buf(buf)} {
		if _, err := c.ReadBuffer(ctx, ref, 1, 0, 0); !errors.Is(err, ErrNotLoaded) {
			t.Errorf("%v unloaded: %v, want ErrNotLoaded", ref, err)
		}
	}
	if _, err := c.ReadBuffer(ctx, Buf(9999), 1, 0, 0); !errors.Is(err, ErrNoBuffer) {
		t.Errorf("buffer 9999: %v, want ErrNoBuffer", err)
	}
	for _, ref := range []BufferRef{{}, {Number: -1}, File("relative.c"), {Number: 1, Path: "/x"}} {
		if _, err := c.ReadBuffer(ctx, ref, 1, 0, 0); err == nil {
			t.Errorf("%+v accepted", ref)
		}
	}
}

func TestParseBufferRef(t *testing.T) {
	for in, want := range map[string]BufferRef{"3": Buf(3), "/a/b c.c": File("/a/b c.c")} {
		got, err := ParseBufferRef(in)
		if err != nil || got != want {
			t.Errorf("ParseBufferRef(%q) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"0", "-2", "rel.c", ""} {
		if _, err := ParseBufferRef(in); err == nil {
			t.Errorf("ParseBufferRef(%q) accepted", in)
		}
	}
}

// Invalid UTF-8 and NUL bytes come back as valid UTF-8 text (U+FFFD, U+2400)
// plus the exact raw bytes.
func TestReadBufferInvalidUTF8(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	raw := []string{"ok \u2713", "bad \xff\xfe end", "nul a\x00b", "\xe2\x82", "literal \ufffd"}
	var buf int
	n.Lua(t, &buf, `local b = vim.api.nvim_create_buf(true, false)
vim.api.nvim_buf_set_lines(b, 0, -1, true, ...)
return b`, raw)
	got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ok \u2713", "bad \ufffd\ufffd end", "nul a\u2400b", "\ufffd\ufffd", "literal \ufffd"}
	for i := range raw {
		l := got.Lines()[i]
		if l.S != want[i] {
			t.Errorf("line %d text %q, want %q", i+1, l.S, want[i])
		}
		wantRaw := i >= 1 && i <= 3
		if wantRaw != (l.Raw != nil) || (wantRaw && !bytes.Equal(l.Raw, []byte(raw[i]))) {
			t.Errorf("line %d raw %q (want raw=%v of %q)", i+1, l.Raw, wantRaw, raw[i])
		}
	}

	// The same bytes in a file on disk: Neovim decodes it by 'fileencodings'
	// (here as latin1); whatever it holds comes back as valid UTF-8.
	p := filepath.Join(n.Dir, "bin.txt")
	if err := os.WriteFile(p, []byte("a\x00b\n\xff\xfe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fb := edit(t, n, p)
	got, err = c.ReadBuffer(ctx, Buf(fb), 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Lines()) != 2 || got.Lines()[0].S != "a\u2400b" {
		t.Fatalf("file lines %+v", got.Lines())
	}
	for _, l := range got.Lines() {
		if !strings.ContainsRune(l.S, 0) && l.S == strings.ToValidUTF8(l.S, "?") {
			continue
		}
		t.Errorf("line %d not clean: %q", l.N, l.S)
	}
}

// The byte budget is applied inside Neovim: a huge buffer is not sent whole.
func TestReadBufferHuge(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	var buf int
	// 200,000 lines of 100 bytes (about 20 MB) and one 5 MB line.
	n.Lua(t, &buf, `local b = vim.api.nvim_create_buf(true, false)
local line = string.rep('x', 99)
local t = {}
for i = 1, 200000 do t[i] = line end
t[#t + 1] = string.rep('y', 5 * 1024 * 1024)
vim.api.nvim_buf_set_lines(b, 0, -1, true, t)
return b`)
	t0 := time.Now()
	got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(t0)
	if got.Total != 200001 || !got.Truncated {
		t.Fatalf("total %d truncated %v", got.Total, got.Truncated)
	}
	if len(got.Lines()) != (64<<10)/100 {
		t.Errorf("%d lines for a 64 KiB budget, want %d", len(got.Lines()), (64<<10)/100)
	}
	if d > time.Second {
		t.Errorf("capped read of a 20 MB buffer took %v", d)
	}

	// A single line over the budget is cut, not dropped, at a rune boundary.
	got, err = c.ReadBuffer(ctx, Buf(buf), 200001, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || len(got.Lines()) != 1 || !got.Lines()[0].Cut || len(got.Lines()[0].S) != 1000 {
		t.Fatalf("giant line: truncated %v, %d lines, first %d bytes", got.Truncated, len(got.Lines()), len(got.Lines()[0].S))
	}
	n.Lua(t, nil, `vim.api.nvim_buf_set_lines(..., 0, 1, true, {string.rep('\u{e9}', 1000)})`, buf) // 2 bytes each
	got, err = c.ReadBuffer(ctx, Buf(buf), 1, 1, 999)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Lines()[0]; !l.Cut || l.S != strings.Repeat("\u00e9", 499) || l.Raw != nil {
		t.Errorf("cut multibyte line: %d bytes, raw %v", len(l.S), l.Raw != nil)
	}
}

func TestStatus(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	a := writeFile(t, n.Dir, "a.c", "one\ntwo\nthree\n")
	b := writeFile(t, n.Dir, "b.lua", "print(1)\n") // not .py: its ftplugin takes seconds
	edit(t, n, b)
	ab := edit(t, n, a)
	n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {3, 2}); vim.api.nvim_buf_set_lines(0, 0, 1, true, {'ONE'})`)
	var scratch int
	n.Lua(t, &scratch, `local b = vim.api.nvim_create_buf(true, true); return b`)

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "n" || st.Blocking || st.Waiting {
		t.Errorf("mode %q blocking %v waiting %v", st.Mode, st.Blocking, st.Waiting)
	}
	if st.Buffer != ab || st.File.S != a || st.Line != 3 || st.Col != 3 {
		t.Errorf("current: buf %d file %q at %d:%d; want buf %d %q at 3:3", st.Buffer, st.File.S, st.Line, st.Col, ab, a)
	}
	if st.Cwd.S != n.Dir {
		t.Errorf("cwd %q, want %q", st.Cwd.S, n.Dir)
	}
	byName := map[string]BufferInfo{}
	for _, bi := range st.Buffers {
		byName[bi.Name.S] = bi
	}
	if bi := byName[a]; !bi.Loaded || !bi.Modified || bi.Lines != 3 || bi.Filetype != "c" || bi.Buftype != "" || !bi.Listed {
		t.Errorf("a.c: %+v", bi)
	}
	if bi := byName[b]; !bi.Loaded || bi.Modified || bi.Lines != 1 || bi.Filetype != "lua" {
		t.Errorf("b.lua: %+v", bi)
	}
	found := false
	for _, bi := range st.Buffers {
		if bi.Number == scratch {
			found = true
			if bi.Buftype != "nofile" {
				t.Errorf("scratch buftype %q", bi.Buftype)
			}
		}
	}
	if !found {
		t.Errorf("scratch buffer %d missing from %+v", scratch, st.Buffers)
	}

	// A terminal as the current buffer: no File.
	n.Exec(t, "enew | call termopen(['sleep', '60'])")
	st, err = c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.File.S != "" {
		t.Errorf("terminal buffer reported as file %q", st.File.S)
	}
	for _, bi := range st.Buffers {
		if bi.Number == st.Buffer && bi.Buftype != "terminal" {
			t.Errorf("current buffer buftype %q, want terminal", bi.Buftype)
		}
	}
}

func TestDiagnostics(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	a := edit(t, n, writeFile(t, n.Dir, "a.c", "int x\nint y\n"))
	b := edit(t, n, writeFile(t, n.Dir, "b.c", "z\n"))
	n.Lua(t, nil, `local a, b = ...
local ns = vim.api.nvim_create_namespace('test-lsp')
vim.diagnostic.set(ns, a, {
  {lnum = 0, col = 5, end_lnum = 0, end_col = 6, severity = vim.diagnostic.severity.ERROR,
   message = "expected ';'\0 after \255", source = 'gcc', code = 1234},
  {lnum = 1, col = 0, severity = vim.diagnostic.severity.WARN, message = 'unused'},
})
vim.diagnostic.set(ns, b, {{lnum = 0, col = 0, severity = vim.diagnostic.severity.HINT, message = 'hint'}})`, a, b)

	got, err := c.Diagnostics(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != 2 || len(got.Items) != 2 {
		t.Fatalf("buffer a: %+v", got)
	}
	d := got.Items[0]
	if d.Line != 1 || d.Col != 6 || d.EndLine != 1 || d.EndCol != 7 || d.Severity != "error" ||
		d.Source.S != "gcc" || d.Code.S != "1234" || d.Buffer != a || !strings.HasSuffix(d.File.S, "/a.c") {
		t.Errorf("first diagnostic %+v", d)
	}
	if d.Message.S != "expected ';'\u2400 after \ufffd" || !bytes.Equal(d.Message.Raw, []byte("expected ';'\x00 after \xff")) {
		t.Errorf("message %q raw %q", d.Message.S, d.Message.Raw)
	}
	if got.Items[1].Severity != "warning" || got.Items[1].EndLine != 2 {
		t.Errorf("second diagnostic %+v", got.Items[1])
	}

	all, err := c.Diagnostics(ctx, 0)
	if err != nil || all.Total != 3 {
		t.Fatalf("all: %+v %v", all, err)
	}
	if _, err := c.Diagnostics(ctx, 9999); !errors.Is(err, ErrNoBuffer) {
		t.Errorf("buffer 9999: %v", err)
	}
}

func TestMakeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"\xff":             "\ufffd",
		"a\x00":            "a\u2400",
		"\xe2\x82\xac":     "\u20ac",
		"\xe2\x82":         "\ufffd\ufffd",
		"tab\tok":          "tab\tok",
		"\x1b[31mred":      "\u241b[31mred",
		"a\rb\x7f\x07":     "a\u240db\u2421\u2407",
		"c1 \u009b31m":     "c1 \ufffd31m",
		"\u202eevil":       "\ufffdevil",
		"\u2066i\u2069":    "\ufffdi\ufffd",
		"caf\u00e9 \u2713": "caf\u00e9 \u2713",
	} {
		got := makeText(in)
		if got.S != want {
			t.Errorf("makeText(%q) = %q, want %q", in, got.S, want)
		}
		if (got.Raw != nil) != (in != want) {
			t.Errorf("makeText(%q) raw %q", in, got.Raw)
		}
	}
	for in, want := range map[string]string{"ab\xe2\x82": "ab", "ab\xc3": "ab", "ab\xc3\xa9": "ab\xc3\xa9", "abc": "abc"} {
		if got := trimPartialRune(in); got != want {
			t.Errorf("trimPartialRune(%q) = %q", in, got)
		}
	}
}

// plainRef is plainText the slow way: every rune kept as it is.
func plainRef(s string, newlines bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if textReplacement(r) >= 0 && !(newlines && r == '\n') {
			return false
		}
	}
	return true
}

func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"", "int main(void) {\n\treturn 0;\n}\n", "ż\x7f", "abcdefgh\x1b[0m", "\xff", "a\u202eb", "12345678\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainText(s), plainRef(s, false); got != want {
			t.Fatalf("plainText(%q) = %v, want %v", s, got, want)
		}
		if got, want := plainLines(s), plainRef(s, true); got != want {
			t.Fatalf("plainLines(%q) = %v, want %v", s, got, want)
		}
	})
}

// TestLuaFunctionsRedefined: the chunks live in Neovim as functions; when
// the student's config clears or clobbers their table, or replaces one with
// something that is not a function, the next call defines them again.
func TestLuaFunctionsRedefined(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "a.c", "one\ntwo\n"))
	read := func(when string) {
		t.Helper()
		got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0)
		if err != nil || len(got.Lines()) != 2 || got.Lines()[1].S != "two" {
			t.Fatalf("%s: read %+v, %v", when, got, err)
		}
	}
	read("first")
	var keys int
	n.Lua(t, &keys, `local k = 0; for _ in pairs(package.loaded._stem_rpc) do k = k + 1 end; return k`)
	if keys < 1 {
		t.Fatalf("no function kept in package.loaded._stem_rpc")
	}
	for _, clobber := range []string{
		`package.loaded._stem_rpc = nil`,
		`package.loaded._stem_rpc = 42`,
		`for k in pairs(package.loaded._stem_rpc) do package.loaded._stem_rpc[k] = 'x' end`,
		`setmetatable(package.loaded._stem_rpc, {__index = function() error('trap') end}); for k in pairs(package.loaded._stem_rpc) do package.loaded._stem_rpc[k] = nil end`,
	} {
		n.Lua(t, nil, clobber)
		read("after " + clobber)
	}
}

// TestReadBufferBudget checks reads that end inside and across Neovim-side
// chunks against the rule computed here: whole lines while each line plus
// its newline fits the budget.
func TestReadBufferBudget(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	var buf int
	n.Lua(t, &buf, `local b = vim.api.nvim_create_buf(true, false)
local t = {}
for i = 1, 3000 do t[i] = string.rep(string.char(97 + i % 26), i % 37) end
vim.api.nvim_buf_set_lines(b, 0, -1, true, t)
return b`)
	all := make([]string, 3000)
	for i := range all {
		all[i] = strings.Repeat(string(rune('a'+(i+1)%26)), (i+1)%37)
	}
	for _, tc := range []struct{ start, end, budget int }{
		{1, 0, 1 << 20}, {1, 0, 20000}, {1, 0, 18 * 1024}, {1000, 2500, 30000},
		{1024, 1025, 100}, {2048, 0, 5}, {1, 3, 9}, {1, 4, 9}, {3000, 0, 1}, {2999, 3000, 37}, {1, 1, 1}, {3001, 0, 100},
	} {
		got, err := c.ReadBuffer(ctx, Buf(buf), tc.start, tc.end, tc.budget)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		last := tc.end
		if last == 0 {
			last = 3000
		}
		var want []string
		used, truncated := 0, false
		for i := tc.start; i <= last; i++ {
			if used+len(all[i-1])+1 > tc.budget {
				truncated = true
				break
			}
			used += len(all[i-1]) + 1
			want = append(want, all[i-1])
		}
		if len(want) == 0 && truncated { // a first line over the budget is cut
			want = []string{all[tc.start-1][:tc.budget]}
		}
		if got.Truncated != truncated || got.Count != len(want) || got.Joined() != strings.Join(want, "\n") {
			t.Errorf("%+v: truncated %v count %d (%d bytes), want %v %d (%d bytes)",
				tc, got.Truncated, got.Count, len(got.Joined()), truncated, len(want), len(strings.Join(want, "\n")))
		}
		if lines := got.Lines(); len(lines) > 0 && (lines[0].N != tc.start || lines[len(lines)-1].N != tc.start+len(lines)-1) {
			t.Errorf("%+v: lines numbered %d..%d", tc, lines[0].N, lines[len(lines)-1].N)
		}
	}
}
