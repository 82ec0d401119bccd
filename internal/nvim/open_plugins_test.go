package nvim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// Neovim's gzip, tar and zip plugins hook the reading of a file by its
// name (*.gz, *.tar, *.zip, ...) and run programs on it. The programs
// below stand in for the real ones, first on Neovim's PATH: each only
// writes its command line to the canary file.
var archivePrograms = []string{
	"gzip", "gunzip", "zcat", "bzip2", "bzcat", "xz", "lzma", "lzcat", "lzip",
	"zstd", "brotli", "lzop", "uncompress", "compress", "tar", "unzip", "zip", "file",
}

// archiveNames are files whose names wake those plugins. The zip file
// starts with "PK", which zip#Browse checks before running unzip. The
// contents are ASCII so the buffer's text can be compared (the plugins do
// not look at the magic numbers).
var archiveNames = map[string]string{
	"x.c.gz":   "not really gzip\n",
	"x.bz2":    "BZh not really bzip2\n",
	"x.xz":     "not really xz\n",
	"x.Z":      "not really compress\n",
	"x.lzma":   "not really lzma\n",
	"x.zst":    "not really zstd\n",
	"x.tar":    "not really a tar file\n",
	"x.tgz":    "not really a tgz file\n",
	"x.tar.gz": "not really a tar.gz file\n",
	"x.tar.xz": "not really a tar.xz file\n",
	"x.zip":    "PK not really a zip file\n",
	"x.jar":    "PK not really a jar file\n",
}

// standIns writes the stand-in programs into a new directory and returns
// the environment that puts it first on PATH, and the canary's path.
func standIns(t *testing.T) (env []string, canary string) {
	t.Helper()
	bin := t.TempDir()
	canary = filepath.Join(t.TempDir(), "canary")
	script := "#!/bin/sh\necho \"$0 $*\" >> '" + canary + "'\n"
	for _, p := range archivePrograms {
		if err := os.WriteFile(filepath.Join(bin, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, canary
}

// unblock answers the prompts a failed plugin left (Press ENTER), so the
// next case can run.
func unblock(t *testing.T, n *nvimtest.Nvim) {
	t.Helper()
	for i := 0; i < 20; i++ {
		if _, blocking := n.Mode(t); !blocking {
			return
		}
		n.Input(t, "<CR>")
		time.Sleep(50 * time.Millisecond)
	}
}

func ranPrograms(canary string) string {
	data, err := os.ReadFile(canary)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(data))
}

// reenablePlugins is what a student's config could do after sysinit.vim
// turned the archive plugins off.
const reenablePlugins = `unlet! g:loaded_gzip g:loaded_tarPlugin g:loaded_zipPlugin
runtime plugin/gzip.vim
runtime plugin/tarPlugin.vim
runtime plugin/zipPlugin.vim`

func TestOpenArchivesRunNothing(t *testing.T) {
	cases := []struct {
		name    string
		sysinit bool
		// reenable: the student's config turns the plugins back on.
		reenable bool
	}{
		{"sysinit", true, false},
		{"no sysinit", false, false},
		{"sysinit, plugins re-enabled", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, canary := standIns(t)
			n, c := start(t, nvimtest.Options{NoSysinit: !tc.sysinit, Env: env})
			ctx := testCtx(t)
			if tc.reenable {
				n.Exec(t, reenablePlugins)
			}
			var loaded struct {
				Gzip, Tar, Zip bool
			}
			n.Lua(t, &loaded, `return {Gzip = vim.fn.exists('#gzip') == 1, Tar = vim.fn.exists('#tar') == 1, Zip = vim.fn.exists('#zip') == 1}`)
			pluginsOn := loaded.Gzip && loaded.Tar && loaded.Zip
			if tc.sysinit && !tc.reenable && (loaded.Gzip || loaded.Tar || loaded.Zip) {
				t.Errorf("sysinit.vim left archive plugins loaded: %+v", loaded)
			}
			if !tc.sysinit || tc.reenable {
				if !pluginsOn {
					t.Fatalf("archive plugins not loaded (%+v): this case proves nothing", loaded)
				}
				// Control: the student's own :edit does run the stand-ins.
				p := writeFile(t, n.Dir, "control.gz", "not really gzip\n")
				edit(t, n, p)
				if ranPrograms(canary) == "" {
					t.Fatal("control: :edit of a .gz file ran no program, so the canary proves nothing")
				}
				os.Remove(canary)
				n.Exec(t, "enew")
			}
			for name, content := range archiveNames {
				p := writeFile(t, n.Dir, name, content)
				var before int
				n.Lua(t, &before, `return vim.api.nvim_get_current_buf()`)
				o, err := c.Open(ctx, p)
				if err != nil {
					t.Errorf("Open %s: %v", name, err)
					unblock(t, n)
				}
				if ran := ranPrograms(canary); ran != "" {
					t.Errorf("Open %s ran programs: %s", name, ran)
					os.Remove(canary)
				}
				if err != nil {
					continue
				}
				// The buffer holds the file as it is on disk; the
				// student's window still shows what it showed.
				var st struct {
					Cur   int    `msgpack:"cur"`
					Name  string `msgpack:"name"`
					First string `msgpack:"first"`
					BT    string `msgpack:"bt"`
				}
				n.Lua(t, &st, `local b = ...; return {cur = vim.api.nvim_get_current_buf(), name = vim.api.nvim_buf_get_name(b),
					first = vim.api.nvim_buf_get_lines(b, 0, 1, true)[1], bt = vim.bo[b].buftype}`, o.Buffer)
				want := strings.TrimSuffix(content, "\n")
				if st.Cur != before || st.Name != p || st.First != want || st.BT != "" {
					t.Errorf("Open %s: current %d (want %d, the student's), name %q, first line %q (want %q), buftype %q", name, st.Cur, before, st.Name, st.First, want, st.BT)
				}
				// The student looks at it.
				n.Exec(t, fmt.Sprintf("buffer %d | redraw", o.Buffer))
			}
			// Redraws, cursor moves and leaving the buffer run nothing either.
			n.Exec(t, "redraw | enew | redraw")
			if ran := ranPrograms(canary); ran != "" {
				t.Errorf("programs ran after Open: %s", ran)
			}
		})
	}
}

// The second layer: whatever the student's config hooks on reading a file
// is not run for a file stem opens, but the file still gets its filetype
// (syntax, filetype plugins) as with :edit.
func TestOpenIgnoresReadAutocommands(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	canary := filepath.Join(n.Dir, "canary")
	n.Exec(t, `set eventignore=CursorHold
augroup student
  autocmd!
  autocmd BufReadPre,BufReadPost,FileReadPre,FileReadPost,BufNewFile *.c call writefile([expand('<amatch>')], 'canary', 'a')
  autocmd BufReadCmd *.cmd call writefile([expand('<amatch>')], 'canary', 'a')
  autocmd FileType c let b:stem_test_ft = 1
augroup END`)
	p := writeFile(t, n.Dir, "x.c", "int main(void) { return 0; }\n")
	o, err := c.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	np := filepath.Join(n.Dir, "new.c")
	o2, err := c.Open(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	cp := writeFile(t, n.Dir, "x.cmd", "text of x.cmd\n")
	o3, err := c.Open(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(canary); err == nil {
		t.Errorf("read autocommands ran for Open: %q", data)
	}
	for _, b := range []int{o.Buffer, o2.Buffer} {
		var st struct {
			FT     string `msgpack:"ft"`
			Syntax string `msgpack:"syntax"`
			Hook   bool   `msgpack:"hook"`
			Cur    string `msgpack:"cur"`
		}
		n.Lua(t, &st, `local b = ...; return {ft = vim.bo[b].filetype, syntax = vim.bo[b].syntax,
			hook = vim.b[b].stem_test_ft == 1, cur = vim.b[b].current_syntax or ''}`, b)
		if st.FT != "c" || st.Syntax != "c" || !st.Hook || st.Cur != "c" {
			t.Errorf("buffer %d: filetype %q, syntax %q (loaded %q), FileType hook ran %v; want c, c, c, true", b, st.FT, st.Syntax, st.Cur, st.Hook)
		}
	}
	// BufReadCmd would have replaced the read; the file itself is there.
	if got := bufLines(t, n, o3.Buffer); len(got) != 1 || got[0] != "text of x.cmd" {
		t.Errorf("x.cmd: %q", got)
	}
	var ei string
	n.Lua(t, &ei, `return vim.go.eventignore`)
	if ei != "CursorHold" {
		t.Errorf("eventignore is %q after Open, want the student's CursorHold", ei)
	}
	// The student's :edit still runs their hooks (the control).
	n.Exec(t, "enew")
	edit(t, n, writeFile(t, n.Dir, "y.c", "int y;\n"))
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("control: the student's BufRead hook did not run on :edit (%v), so the check above proves nothing", err)
	}
}

// Open restores 'eventignore' and 'modelines' when loading fails.
func TestOpenRestoresOptionsOnError(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	n.Exec(t, `set eventignore=CursorHold modelines=3
autocmd FileType c lua error('student hook fails')`)
	p := writeFile(t, n.Dir, "x.c", "int x;\n")
	// A failing FileType hook of the student's does not fail the open.
	if _, err := c.Open(ctx, p); err != nil {
		t.Errorf("Open with a failing FileType hook: %v", err)
	}
	// A failing hook on entering the buffer fails the open.
	n.Exec(t, `autocmd BufEnter y.c lua error('student hook fails')`)
	if _, err := c.Open(ctx, writeFile(t, n.Dir, "y.c", "int y;\n")); err == nil || !strings.Contains(err.Error(), "student hook fails") {
		t.Errorf("Open with a failing BufEnter hook: %v", err)
	}
	var st struct {
		EI  string `msgpack:"ei"`
		MLS int    `msgpack:"mls"`
	}
	n.Lua(t, &st, `return {ei = vim.go.eventignore, mls = vim.go.modelines}`)
	if st.EI != "CursorHold" || st.MLS != 3 {
		t.Errorf("after the failed Open: eventignore %q, modelines %d; want CursorHold, 3", st.EI, st.MLS)
	}
}
