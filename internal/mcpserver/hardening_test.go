package mcpserver_test

// The audit's three gaps, end to end through stem-mcp: nvim_open of an
// archive must start no program (Neovim's gzip/tar/zip plugins), host-side
// reads of card files must not follow a directory swapped for a symlink,
// and buffers outside the card repository are not readable below full.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// archiveFiles wake Neovim's gzip, tar and zip plugins by name (the zip
// one checks for "PK" first). ASCII, so the buffer can be compared.
var archiveFiles = map[string]string{
	"x.c.gz": "not really gzip", "x.bz2": "not really bzip2", "x.xz": "not really xz",
	"x.Z": "not really compress", "x.zst": "not really zstd", "x.tar": "not really tar",
	"x.tgz": "not really tgz", "x.tar.gz": "not really tar.gz", "x.zip": "PK not really zip",
}

// standInPrograms are what those plugins run; the stand-ins only append
// their command line to the canary.
var standInPrograms = []string{"gzip", "gunzip", "zcat", "bzip2", "bzcat", "xz", "lzma", "zstd",
	"uncompress", "compress", "tar", "unzip", "zip", "file"}

func TestOpenArchivesStartNothing(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	sen := newSentinels(t, in)
	card, task := in.Resolved.CardPath, in.Resolved.TaskDir
	bin := t.TempDir()
	canary := sen.Canaries[0]
	for _, p := range standInPrograms {
		script := "#!/bin/sh\necho \"$0 $*\" >> '" + canary + "'\n"
		if err := os.WriteFile(filepath.Join(bin, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range archiveFiles {
		if err := os.WriteFile(filepath.Join(task, name), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(task, "control.gz"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st.lua(nil, `vim.env.PATH = ... .. ':' .. vim.env.PATH`, bin)
	as := connect(t, in, "assist")
	obs := connect(t, in, "observe")
	before := takeSnapshot(t, card)

	openAll := func(t *testing.T) {
		t.Helper()
		as, obs := as.sub(t), obs.sub(t)
		for name, content := range archiveFiles {
			rel := "t1/" + name
			out, etext, err := as.call("nvim_open", map[string]any{"path": rel})
			if err != nil || etext != "" {
				t.Errorf("nvim_open %s: %v %s", rel, err, etext)
			}
			if data, err := os.ReadFile(canary); err == nil {
				os.Remove(canary)
				t.Errorf("nvim_open %s started programs:\n%s", rel, data)
			}
			if etext != "" {
				st.lua(nil, `vim.api.nvim_input('<CR>')`) // a plugin's error left a prompt
				continue
			}
			sen.check(t, "nvim_open "+rel, mustJSON(out))
			want := filepath.Join(task, name)
			if txt, ok := st.bufferText(want); !ok || txt != content {
				t.Errorf("nvim_open %s: buffer holds %q (found %v), want the file as it is", rel, txt, ok)
			}
			rd := obs.ok("nvim_buffer_read", map[string]any{"path": rel})
			if l := readLines(t, rd); len(l) != 1 || l[0].Text != content {
				t.Errorf("nvim_buffer_read %s: %v", rel, rd)
			}
			if m := st.nvimMode(); m != "n" {
				t.Fatalf("after nvim_open %s Neovim is in mode %q", rel, m)
			}
		}
		// Wipe the buffers so the next round loads them again.
		st.lua(nil, `vim.cmd('enew')
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  local n = vim.api.nvim_buf_get_name(b)
  if n:match('/x%.') then vim.api.nvim_buf_delete(b, {force = true}) end
end`)
	}

	t.Run("sysinit.vim", func(t *testing.T) {
		var on []bool
		st.lua(&on, `return {vim.fn.exists('#gzip') == 1, vim.fn.exists('#tar') == 1, vim.fn.exists('#zip') == 1}`)
		if len(on) != 3 || on[0] || on[1] || on[2] {
			t.Errorf("the gzip/tar/zip plugins are loaded in the student's Neovim despite sysinit.vim: %v", on)
		}
		openAll(t)
	})
	t.Run("plugins re-enabled by the student", func(t *testing.T) {
		st.lua(nil, `vim.cmd([[
unlet! g:loaded_gzip g:loaded_tarPlugin g:loaded_zipPlugin
runtime plugin/gzip.vim
runtime plugin/tarPlugin.vim
runtime plugin/zipPlugin.vim
]])`)
		// Control: the student's own :edit now runs a stand-in.
		ctl := filepath.Join(task, "control.gz")
		st.lua(nil, `pcall(vim.cmd, 'silent! edit ' .. vim.fn.fnameescape(...)); vim.cmd('enew')`, ctl)
		if _, err := os.Stat(canary); err != nil {
			t.Fatalf("control: the student's :edit of a .gz file ran no stand-in (%v): the test proves nothing", err)
		}
		os.Remove(canary)
		openAll(t)
	})
	sen.check(t, "end", "")
	if d := before.diff(takeSnapshot(t, card)); d != "" {
		t.Errorf("the card repository changed:\n%s", d)
	}
}

// TestDiskReadSwapRace: while nvim_buffer_read reads a card file from
// disk, something in the container swaps the directory holding it for a
// symlink to a directory outside the card with a secret at the same
// relative path, as fast as it can. No result may hold the secret.
func TestDiskReadSwapRace(t *testing.T) {
	in := fixture(t)
	sen := newSentinels(t, in)
	task := in.Resolved.TaskDir
	dir := filepath.Join(task, "sub")
	link := filepath.Join(task, "sub.swap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f.c"), []byte("inside\n"), 0o644)
	os.MkdirAll(filepath.Join(sen.Outside, "sub"), 0o700)
	os.WriteFile(filepath.Join(sen.Outside, "sub", "f.c"), []byte(sen.Secret+"\n"), 0o600)
	if err := os.Symlink(filepath.Join(sen.Outside, "sub"), link); err != nil {
		t.Fatal(err)
	}
	obs := connect(t, in, "observe")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	// 5,000 reads, and more until both outcomes were seen: a read that
	// found the directory and one refused because it found the symlink.
	var read, refused int
	for i := 0; i < 5000 || read == 0 || refused == 0; i++ {
		if i >= 20000 {
			t.Fatalf("after %d reads: %d read, %d refused: the race did not happen", i, read, refused)
		}
		out, etext, err := obs.call("nvim_buffer_read", map[string]any{"path": "t1/sub/f.c"})
		if err != nil {
			t.Fatal(err)
		}
		sen.check(t, fmt.Sprintf("read %d", i), mustJSON(out)+etext)
		if etext != "" {
			refused++
		} else {
			read++
		}
	}
	t.Logf("%d reads, %d refused", read, refused)
}

// TestBuffersOutsideTheCard: the student has files outside the card open
// (the socket directory's container.json, a system file, one through a
// symlink in the card); observe and assist see that they exist but not
// their text, by number, as a resource, or in diagnostics. Unnamed buffers
// and card files stay readable; full reads everything.
func TestBuffersOutsideTheCard(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	sen := newSentinels(t, in)
	task := in.Resolved.TaskDir
	// Through a symlink inside the card: the buffer's name is in the card,
	// its file is not.
	if err := os.Symlink(sen.SecretAt, filepath.Join(task, "leak.c")); err != nil {
		t.Fatal(err)
	}
	cj := filepath.Join(in.Dir.Path, "container.json")
	var bufs struct {
		Secret, CJ, Leak, Card, Scratch int
	}
	st.lua(&bufs, `local secret, cj, leak, card = ...
local function open(p)
  vim.cmd('edit ' .. vim.fn.fnameescape(p))
  return vim.api.nvim_get_current_buf()
end
local r = {Secret = open(secret), CJ = open(cj), Leak = open(leak), Card = open(card)}
local s = vim.api.nvim_create_buf(true, true)
vim.api.nvim_buf_set_lines(s, 0, -1, true, {'SCRATCH-TEXT'})
r.Scratch = s
local ns = vim.api.nvim_create_namespace('stem-outside')
vim.diagnostic.set(ns, r.Secret, {{lnum = 0, col = 0, message = 'DIAG ' .. vim.api.nvim_buf_get_lines(r.Secret, 0, 1, true)[1], severity = 1}})
vim.diagnostic.set(ns, r.Card, {{lnum = 0, col = 0, message = 'CARD-DIAG', severity = 2}})
return r`, sen.SecretAt, cj, filepath.Join(task, "leak.c"), filepath.Join(task, "words.c"))
	var leakText string
	st.lua(&leakText, `return vim.api.nvim_buf_get_lines(..., 0, 1, true)[1]`, bufs.Leak)
	if !strings.Contains(leakText, sen.Secret) {
		t.Fatalf("control: the symlinked buffer does not hold the secret (%q): the test proves nothing", leakText)
	}
	outside := map[string]int{"secret": bufs.Secret, "container.json": bufs.CJ, "leak.c (symlink)": bufs.Leak}
	for _, level := range []string{"observe", "assist"} {
		t.Run(level, func(t *testing.T) {
			s := connect(t, in, level)
			for what, b := range outside {
				msg := s.refused("nvim_buffer_read", map[string]any{"buffer": b})
				sen.check(t, "nvim_buffer_read "+what, msg)
				if !strings.Contains(msg, "outside the card repository") {
					t.Errorf("nvim_buffer_read %s: %s", what, msg)
				}
				if strings.Contains(msg, in.Record.ContainerID) {
					t.Errorf("nvim_buffer_read %s: container.json's text in the refusal: %s", what, msg)
				}
				if text, err := s.readResource(fmt.Sprintf("stem://buffer/%d", b)); err == nil {
					t.Errorf("stem://buffer/%d (%s) read: %q", b, what, clip(text, 200))
				} else {
					sen.check(t, "stem://buffer "+what, err.Error())
				}
				d := s.ok("nvim_diagnostics", map[string]any{"buffer": b})
				sen.check(t, "nvim_diagnostics "+what, mustJSON(d))
				if items := mustSlice(get(d, "diagnostics", "items")); len(items) != 0 {
					t.Errorf("nvim_diagnostics %s: %v", what, d)
				}
			}
			if level == "assist" {
				msg := s.refused("nvim_hint", map[string]any{"path": "t1/leak.c", "line": 1, "text": "x"})
				sen.check(t, "nvim_hint leak.c", msg)
			}
			all := s.ok("nvim_diagnostics", nil)
			sen.check(t, "nvim_diagnostics", mustJSON(all))
			if items := mustSlice(get(all, "diagnostics", "items")); len(items) != 1 || str(get(items[0], "message", "text")) != "CARD-DIAG" {
				t.Errorf("nvim_diagnostics: %s", mustJSON(all))
			}
			if num(all["omitted_outside_card"]) != 1 {
				t.Errorf("nvim_diagnostics does not count the one it left out: %v", all["omitted_outside_card"])
			}
			// The buffer list still names them, marked.
			ns := s.ok("nvim_status", nil)
			marks := map[int]bool{}
			for _, b := range mustSlice(get(ns, "status", "buffers")) {
				marks[num(get(b, "number"))] = get(b, "outside_card") == true
			}
			for what, b := range map[string]int{"secret": bufs.Secret, "container.json": bufs.CJ} {
				if !marks[b] {
					t.Errorf("nvim_status: %s (buffer %d) not marked outside_card: %s", what, b, clip(mustJSON(ns), 1500))
				}
			}
			for what, b := range map[string]int{"card file": bufs.Card, "scratch": bufs.Scratch} {
				if marks[b] {
					t.Errorf("nvim_status: %s (buffer %d) marked outside_card", what, b)
				}
			}
			// Card files and unnamed buffers read as before.
			if rd := s.ok("nvim_buffer_read", map[string]any{"buffer": bufs.Card, "end": 1}); num(rd["buffer"]) != bufs.Card {
				t.Errorf("card buffer: %v", rd)
			}
			if rd := s.ok("nvim_buffer_read", map[string]any{"buffer": bufs.Scratch}); !strings.Contains(str(rd["text"]), "SCRATCH-TEXT") {
				t.Errorf("scratch buffer: %v", rd)
			}
		})
	}
	t.Run("full", func(t *testing.T) {
		s := connect(t, in, "full")
		rd := s.ok("nvim_buffer_read", map[string]any{"buffer": bufs.Secret})
		if !strings.Contains(str(rd["text"]), sen.Secret) {
			t.Errorf("full: %v", rd)
		}
		if d := s.ok("nvim_diagnostics", nil); len(mustSlice(get(d, "diagnostics", "items"))) != 2 {
			t.Errorf("full diagnostics: %s", mustJSON(d))
		}
	})
}
