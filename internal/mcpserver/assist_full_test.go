package mcpserver_test

// Functional tests of the assist and full tools against the fixture.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/testenv/demotask"
)

func TestAssistTools(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	shell := st.pane("shell")
	st.waitPrompt(shell)
	card, task := in.Resolved.CardPath, in.Resolved.TaskDir
	words, hello := filepath.Join(task, "words.c"), filepath.Join(task, "hello.c")
	wordsDisk, helloDisk := mustRead(t, words), mustRead(t, hello)

	currentFile := func() string {
		var name string
		st.lua(&name, `return vim.api.nvim_buf_get_name(0)`)
		return name
	}

	t.Run("nvim_open", func(t *testing.T) {
		s := s.sub(t)
		shown := currentFile()
		out := s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
		if str(out["path"]) != "t1/words.c" || num(get(out, "opened", "lines")) != 27 || get(out, "opened", "new") != false {
			t.Fatalf("nvim_open: %v", out)
		}
		// Loaded beside what the student sees, which stays.
		if text, ok := st.bufferText(words); !ok || text != strings.TrimSuffix(wordsDisk, "\n") {
			t.Fatalf("words.c is not loaded as on disk (%v):\n%s", ok, text)
		}
		if cf := currentFile(); cf != shown {
			t.Fatalf("the student's window shows %q, want %q as before", cf, shown)
		}
		// Absolute inside the card works too; a new file opens as an empty,
		// unsaved buffer and nothing is written.
		s.ok("nvim_open", map[string]any{"path": hello})
		out = s.ok("nvim_open", map[string]any{"path": "t1/notes.txt"})
		if get(out, "opened", "new") != true {
			t.Fatalf("nvim_open of a new file: %v", out)
		}
		if _, err := os.Stat(filepath.Join(task, "notes.txt")); err == nil {
			t.Fatal("nvim_open created the new file on disk")
		}
		if msg := s.refused("nvim_open", map[string]any{"path": "t1"}); !strings.Contains(msg, "directory") {
			t.Errorf("nvim_open of a directory: %s", msg)
		}
		s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	})

	t.Run("nvim_buffer_edit editable", func(t *testing.T) {
		s := s.sub(t)
		rd := s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "start": 10, "end": 10})
		if l := readLines(t, rd); len(l) != 1 || l[0].Text != "    return c == ' ';" {
			t.Fatalf("words.c line 10: %v", rd)
		}
		out := s.ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 10, "end": 10,
			"lines": []any{"    return c == ' ' || c == '\\t' || c == '\\n';"}, "expected_tick": num(rd["tick"])})
		if out["saved"] != false || num(get(out, "edited", "total")) != 27 {
			t.Fatalf("nvim_buffer_edit: %v", out)
		}
		text, _ := st.bufferText(words)
		if !strings.Contains(text, "    return c == ' ' || c == '\\t' || c == '\\n';") {
			t.Fatalf("the buffer does not hold the edit:\n%s", text)
		}
		if mustRead(t, words) != wordsDisk {
			t.Fatal("nvim_buffer_edit changed the file on disk: edits must land in the buffer, unsaved")
		}
		after := s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1})
		if after["modified"] != true || num(after["tick"]) == num(rd["tick"]) {
			t.Fatalf("after the edit: %v", after)
		}
		// Insert (end = start-1) and delete (no lines).
		s.ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 0, "lines": []any{"/* agent was here */"}})
		s.ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 1, "lines": []any{}})
		if text2, _ := st.bufferText(words); text2 != text {
			t.Fatalf("insert then delete did not restore the buffer:\n%s", text2)
		}
		if msg := s.refusedWith(errcode.BadInput, "nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 100, "end": 100, "lines": []any{"x"}}); !strings.Contains(msg, "outside the buffer") {
			t.Errorf("edit past the end: %s", msg)
		}
		if msg := s.refused("nvim_buffer_edit", map[string]any{"path": "t1/test_words.c", "start": 1, "end": 1, "lines": []any{"x"}}); !strings.Contains(msg, "not open") {
			t.Errorf("edit of an editable file that is not open: %s", msg)
		}
	})

	t.Run("expected_tick", func(t *testing.T) {
		s := s.sub(t)
		rd := s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1})
		tick := num(rd["tick"])
		// The student types in the meantime.
		st.lua(nil, `local p = ... ; local b = vim.fn.bufnr(p); vim.api.nvim_buf_set_lines(b, 0, 0, true, {'// student line'})`, words)
		msg := s.refusedWith(errcode.Stale, "nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 1, "lines": []any{"// agent line"}, "expected_tick": tick})
		if !strings.Contains(msg, "changed since you read it") {
			t.Fatalf("stale tick: %s", msg)
		}
		if text, _ := st.bufferText(words); !strings.HasPrefix(text, "// student line\n") {
			t.Fatalf("a refused edit changed the buffer:\n%s", text)
		}
		rd = s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1})
		s.ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 1, "lines": []any{}, "expected_tick": num(rd["tick"])})
	})

	t.Run("nvim_buffer_edit needs the student's mark on the host", func(t *testing.T) {
		s := s.sub(t)
		s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
		edit := map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"// edited by the agent"}}
		msg := s.refusedWith(errcode.NotEditable, "nvim_buffer_edit", edit)
		if !strings.Contains(msg, "not editable") || !strings.Contains(msg, "stemctl allow "+in.Record.Instance+" --edit t1/hello.c") {
			t.Fatalf("non-editable file: %s", msg)
		}
		if text, _ := st.bufferText(hello); strings.Contains(text, "edited by the agent") {
			t.Fatal("a refused edit changed the buffer")
		}
		// The buffer variable that opened it once, set in the container's
		// Neovim (typed, or by a program there): no longer a mark. The
		// student shows the file to type it there.
		st.lua(nil, `vim.api.nvim_set_current_buf(vim.fn.bufnr(...))`, hello)
		if cf := currentFile(); cf != hello {
			t.Fatalf("current buffer %q", cf)
		}
		st.typeInNvim(":let b:stem_allow_edit = 1")
		waitUntil(t, 5*time.Second, "the buffer variable", func() bool {
			var v int
			st.lua(&v, `return vim.b.stem_allow_edit or 0`)
			return v == 1
		})
		s.refused("nvim_buffer_edit", edit)
		// A mark on another file does not count.
		in.AllowEdit(t, "t1/words.c")
		s.refused("nvim_buffer_edit", edit)
		// The student marks hello.c on the host.
		in.AllowEdit(t, "t1/hello.c")
		s.ok("nvim_buffer_edit", edit)
		if text, _ := st.bufferText(hello); !strings.HasPrefix(text, "// edited by the agent\n") {
			t.Fatalf("the marked file's buffer does not hold the edit:\n%s", text)
		}
		if mustRead(t, hello) != helloDisk {
			t.Fatal("the edit reached the disk")
		}
		// Taking the mark back closes it again.
		in.DisallowEdit(t, "t1/hello.c")
		in.DisallowEdit(t, "t1/words.c")
		s.refused("nvim_buffer_edit", edit)
	})

	t.Run("protected directories", func(t *testing.T) {
		s := s.sub(t)
		protectedFiles := []string{".git/config", ".git/hooks/pre-commit", ".stem/instances/x/notes.txt", ".rv/state"}
		nestedFiles := []string{"t1/sub/.git/hooks/pre-commit", "t1/sub/.git/config"}
		write := func(rels []string) {
			for _, rel := range rels {
				p := filepath.Join(card, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("original\n"), 0o644)
			}
		}
		// A repository nested in the card stops every effectful call
		// (internal/cardgit), so its files are not even opened.
		write(nestedFiles)
		nestedBefore := takeSnapshot(t, card)
		for _, rel := range nestedFiles {
			if msg := s.refused("nvim_open", map[string]any{"path": rel}); !strings.Contains(msg, "nested repository") {
				t.Errorf("open of %s: %s", rel, msg)
			}
		}
		if d := nestedBefore.diff(takeSnapshot(t, card)); d != "" {
			t.Fatalf("the card repository changed:\n%s", d)
		}
		os.RemoveAll(filepath.Join(card, "t1", "sub"))
		write(protectedFiles)
		before := takeSnapshot(t, card)
		for _, rel := range protectedFiles {
			s.ok("nvim_open", map[string]any{"path": rel})
			// Even with a mark on the host (which stemctl allow refuses
			// to write for these).
			in.AllowEdit(t, rel)
			msg := s.refused("nvim_buffer_edit", map[string]any{"path": rel, "start": 1, "end": 1, "lines": []any{"[core] hooksPath = /tmp"}})
			if !strings.Contains(msg, "never editable") {
				t.Errorf("edit of %s: %s", rel, msg)
			}
			if text, _ := st.bufferText(filepath.Join(card, rel)); text != "original" {
				t.Errorf("%s: the refused edit changed the buffer: %q", rel, text)
			}
		}
		if d := before.diff(takeSnapshot(t, card)); d != "" {
			t.Fatalf("the card repository changed:\n%s", d)
		}
		s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	})

	t.Run("nvim_hint", func(t *testing.T) {
		s := s.sub(t)
		s.ok("nvim_open", map[string]any{"path": "t1/words.h"})
		wh := filepath.Join(task, "words.h")
		before, _ := st.bufferText(wh)
		var tick0 int
		st.lua(&tick0, `return vim.b[vim.fn.bufnr(...)].changedtick`, wh)
		out := s.ok("nvim_hint", map[string]any{"path": "t1/words.h", "line": 6, "text": "count_words: what counts as a separator?"})
		if num(out["hint_id"]) < 1 || num(out["line"]) != 6 {
			t.Fatalf("nvim_hint: %v", out)
		}
		// the hint's text, at the end of its line or wrapped below it
		var marks []string
		st.lua(&marks, `local ns = vim.api.nvim_create_namespace('stem-hint')
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(vim.fn.bufnr(...), ns, 0, -1, {details = true})) do
  local s = ''
  for _, c in ipairs(m[4].virt_text or {}) do s = s .. c[1] end
  for _, row in ipairs(m[4].virt_lines or {}) do
    local r = ''
    for _, c in ipairs(row) do r = r .. c[1] end
    s = s == '' and r or (s .. ' ' .. r)
  end
  out[#out + 1] = s
end
return out`, wh)
		if len(marks) != 1 || !strings.HasPrefix(marks[0], "hint from ") || !strings.HasSuffix(marks[0], ": count_words: what counts as a separator?") {
			t.Fatalf("the hint is not in the buffer as labelled virtual text: %q", marks)
		}
		after, _ := st.bufferText(wh)
		var tick1 int
		var modified bool
		st.lua(&tick1, `return vim.b[vim.fn.bufnr(...)].changedtick`, wh)
		st.lua(&modified, `return vim.bo[vim.fn.bufnr(...)].modified`, wh)
		if after != before || modified || tick1 != tick0 {
			t.Fatalf("nvim_hint changed the buffer (modified %v, tick %d -> %d)", modified, tick0, tick1)
		}
		out = s.ok("nvim_hint", map[string]any{"path": "t1/words.h", "clear": true})
		if num(out["cleared"]) != 1 {
			t.Fatalf("nvim_hint clear: %v", out)
		}
		if msg := s.refused("nvim_hint", map[string]any{"path": "t1/words.h", "line": 99, "text": "x"}); !strings.Contains(msg, "past the end") {
			t.Errorf("hint past the end: %s", msg)
		}
	})

	t.Run("pane_send_keys", func(t *testing.T) {
		s := s.sub(t)
		st.waitPrompt(shell)
		msg := s.refused("pane_send_keys", map[string]any{"pane": shell, "keys": "echo SENT-$((6*7)){Enter}"})
		if !strings.Contains(msg, "stemctl allow "+in.Record.Instance+" "+shell) {
			t.Fatalf("send to a pane the student did not allow: %s", msg)
		}
		if strings.Contains(st.shellBarrier(shell), "SENT-") {
			t.Fatal("refused keys reached the pane")
		}
		// The editor's pane is not open either.
		s.refused("pane_send_keys", map[string]any{"pane": st.pane("edit"), "keys": ":qa!{Enter}"})
		// @stem_allow in the container's tmux opens nothing.
		in.Tmux(t, "set", "-p", "-t", shell, "@stem_allow", "1")
		s.refused("pane_send_keys", map[string]any{"pane": shell, "keys": "x"})
		in.AllowPane(t, shell)
		out := s.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "echo SENT-$((6*7)){Enter}"})
		if num(out["sent"]) < 1 {
			t.Fatalf("pane_send_keys: %v", out)
		}
		st.waitPane(shell, `(?m)^SENT-42$`, 10*time.Second)
		in.DisallowPane(t, shell)
		s.refused("pane_send_keys", map[string]any{"pane": shell, "keys": "x"})
		in.Tmux(t, "set", "-p", "-t", shell, "-u", "@stem_allow")
	})

	t.Run("task_action", func(t *testing.T) {
		s := s.sub(t)
		// Restore the task's files (earlier subtests left buffers edited,
		// never saved, so the disk copy is the original).
		build := s.ok("task_action", map[string]any{"action": "build"})
		checkNotice(t, "task_action", build)
		if num(build["exit_code"]) != 0 || !strings.Contains(str(build["output"]), "gcc") || str(build["command"]) != "make" {
			t.Fatalf("build: %v", build)
		}
		pane := str(build["pane"])
		if w := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", pane, "#{window_name} #{@stem_role}")); w != "task task" {
			t.Fatalf("task_action ran in pane %s of window/role %q, want the dedicated task window", pane, w)
		}
		// The demo task's tests fail until the bug is fixed: the exit
		// code and the failing check reach the agent, and so does the pass
		// once the student has fixed it.
		test := s.ok("task_action", map[string]any{"action": "test"})
		if num(test["exit_code"]) != 2 || !strings.Contains(str(test["output"]), demotask.FailingCheck) || str(test["pane"]) != pane {
			t.Fatalf("test before the fix: %v", test)
		}
		restore := fixDemoTask(t, in.Resolved.TaskDir)
		test = s.ok("task_action", map[string]any{"action": "test"})
		restore()
		if num(test["exit_code"]) != 0 || !strings.Contains(str(test["output"]), demotask.Passed) || str(test["pane"]) != pane {
			t.Fatalf("test after the fix: %v", test)
		}
		run := s.ok("task_action", map[string]any{"action": "run"})
		if num(run["exit_code"]) != 0 || !strings.Contains(str(run["output"]), "Hello, stem!") || str(run["pane"]) != pane {
			t.Fatalf("run: %v", run)
		}
		for _, bad := range []string{"debug", "deploy", "make; touch /tmp/x", ""} {
			s.refused("task_action", map[string]any{"action": bad})
		}
	})

	t.Run("events for a failed build and a crash", func(t *testing.T) {
		s := s.sub(t)
		lastSeq := func() int {
			n := 0
			for _, e := range mustSlice(s.ok("session_events", nil)["events"]) {
				n = max(n, num(get(e, "seq")))
			}
			return n
		}
		waitEvent := func(since int, typ string) map[string]any {
			t.Helper()
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				out := s.ok("session_events", map[string]any{"since": since, "wait_ms": 2000})
				for _, e := range mustSlice(out["events"]) {
					if str(get(e, "type")) == typ {
						return e.(map[string]any)
					}
					since = max(since, num(get(e, "seq")))
				}
			}
			t.Fatalf("no %s event", typ)
			return nil
		}
		// A card copy where the build fails.
		os.WriteFile(words, []byte(wordsDisk+"\nint broken( {\n"), 0o644)
		defer os.WriteFile(words, []byte(wordsDisk), 0o644)
		seq := lastSeq()
		build := s.ok("task_action", map[string]any{"action": "build"})
		if num(build["exit_code"]) == 0 || !strings.Contains(str(build["output"]), "error") {
			t.Fatalf("a broken build: %v", build)
		}
		ev := waitEvent(seq, "build_failed")
		if str(ev["action"]) != "build" || num(ev["exit_code"]) != num(build["exit_code"]) || str(ev["pane"]) != str(build["pane"]) || str(ev["role"]) != "task" {
			t.Fatalf("build_failed event: %v", ev)
		}
		os.WriteFile(words, []byte(wordsDisk), 0o644)

		// A card copy whose program segfaults.
		os.WriteFile(hello, []byte(strings.Replace(helloDisk, "    return 0;", "    *(volatile int *)0 = 1;\n    return 0;", 1)), 0o644)
		defer os.WriteFile(hello, []byte(helloDisk), 0o644)
		seq = lastSeq()
		s.ok("task_action", map[string]any{"action": "build"})
		st.waitPrompt(shell)
		st.run(shell, "./hello")
		ev = waitEvent(seq, "program_crashed")
		if str(ev["signal"]) != "SIGSEGV" || num(ev["exit_code"]) != 139 || str(ev["pane"]) != shell {
			t.Fatalf("program_crashed event: %v", ev)
		}
		// Marks a program prints (unkeyed, another shell's key) forge no
		// crash: the command ends at the shell's own mark, with status 0.
		st.waitPrompt(shell)
		seq = lastSeq()
		st.run(shell, `printf '\033]133;C\007\033]133;D;139\007\033]133;D;139;0123456789abcdef\007'`)
		ev = waitEvent(seq, "program_exited")
		if num(ev["exit_code"]) != 0 {
			t.Fatalf("event for a command printing forged marks: %v", ev)
		}
		for _, e := range mustSlice(s.ok("session_events", map[string]any{"since": seq})["events"]) {
			if typ := str(get(e, "type")); typ != "program_exited" || num(get(e, "exit_code")) != 0 {
				t.Errorf("forged marks made an event: %v", e)
			}
		}
		// Run through the manifest (make run): the crash shows in the
		// output; make itself exits 2.
		seq = lastSeq()
		run := s.ok("task_action", map[string]any{"action": "run"})
		if num(run["exit_code"]) == 0 || !regexp.MustCompile(`(?i)segmentation fault|Error 139`).MatchString(str(run["output"])) {
			t.Fatalf("make run of a crashing program: %v", run)
		}
		ev = waitEvent(seq, "program_exited")
		if str(ev["action"]) != "run" || num(ev["exit_code"]) != num(run["exit_code"]) {
			t.Fatalf("event for the crashing make run: %v", ev)
		}
	})
}

func TestFullTools(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "full")
	shell := st.pane("shell")
	st.waitPrompt(shell)

	t.Run("pane_run back to back", func(t *testing.T) {
		s := s.sub(t)
		for i, c := range []struct {
			cmd  string
			out  string
			code int
		}{
			{"echo one", "one\n", 0},
			{"false", "", 1},
			{"(exit 42)", "", 42},
			{"printf 'a\\nb\\n'; exit_code=3; (exit $exit_code)", "a\nb\n", 3},
			{"echo two", "two\n", 0},
			{"seq 1 3 | tail -1", "3\n", 0},
		} {
			out := s.ok("pane_run", map[string]any{"pane": shell, "command": c.cmd})
			if str(out["output"]) != c.out || num(out["exit_code"]) != c.code {
				t.Fatalf("pane_run #%d %q: output %q exit %v, want %q %d", i, c.cmd, out["output"], out["exit_code"], c.out, c.code)
			}
			checkNotice(t, "pane_run", out)
		}
		// It is the student's shell: the commands are in its history.
		st.waitPane(shell, `(?m)^student\$ echo two$`, 5*time.Second)
	})

	t.Run("pane_send_keys to any pane", func(t *testing.T) {
		s := s.sub(t)
		s.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "echo FULL-$((1+1)){Enter}"})
		st.waitPane(shell, `(?m)^FULL-2$`, 10*time.Second)
	})

	t.Run("nvim_command and nvim_lua", func(t *testing.T) {
		s := s.sub(t)
		out := s.ok("nvim_command", map[string]any{"command": "echo 6*7"})
		if strings.TrimSpace(str(out["output"])) != "42" {
			t.Fatalf("nvim_command: %v", out)
		}
		marker := filepath.Join(t.TempDir(), "from-full")
		s.ok("nvim_command", map[string]any{"command": "call writefile(['full'], '" + marker + "')"})
		if mustRead(t, marker) != "full\n" {
			t.Fatal("nvim_command at full did not run")
		}
		out = s.ok("nvim_lua", map[string]any{"code": "local a, b = ... ; return a + b", "args": []any{40, 2}})
		if num(out["result"]) != 42 {
			t.Fatalf("nvim_lua: %v", out)
		}
		if msg := s.refused("nvim_command", map[string]any{"command": "nosuchcommand"}); !strings.Contains(msg, "E492") {
			t.Errorf("a bad Ex command: %s", msg)
		}
	})

	t.Run("nvim_buffer_edit at full", func(t *testing.T) {
		s := s.sub(t)
		s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
		// At full any file in the card is editable, with no mark needed.
		hello := filepath.Join(in.Resolved.TaskDir, "hello.c")
		disk := mustRead(t, hello)
		s.ok("nvim_buffer_edit", map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"// teacher"}})
		if text, _ := st.bufferText(hello); !strings.HasPrefix(text, "// teacher\n") || text[strings.Index(text, "\n"):] != disk[strings.Index(disk, "\n"):len(disk)-1] {
			t.Fatalf("the edit at full did not replace line 1 only:\n%s", text)
		}
		os.MkdirAll(filepath.Join(in.Resolved.CardPath, ".git"), 0o755)
		os.WriteFile(filepath.Join(in.Resolved.CardPath, ".git", "config"), []byte("x\n"), 0o644)
		s.ok("nvim_open", map[string]any{"path": ".git/config"})
		if msg := s.refusedWith(errcode.NotEditable, "nvim_buffer_edit", map[string]any{"path": ".git/config", "start": 1, "end": 1, "lines": []any{"y"}}); !strings.Contains(msg, "never editable") {
			t.Fatalf(".git/config at full: %s", msg)
		}
		// A nested repository stops every effect, at full too.
		os.MkdirAll(filepath.Join(in.Resolved.TaskDir, "sub", ".git", "hooks"), 0o755)
		os.WriteFile(filepath.Join(in.Resolved.TaskDir, "sub", ".git", "hooks", "post-checkout"), []byte("#!/bin/sh\n"), 0o755)
		if msg := s.refusedWith(errcode.UnsafeCard, "nvim_buffer_edit", map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"y"}}); !strings.Contains(msg, "nested repository") {
			t.Fatalf("an edit at full with a nested repository: %s", msg)
		}
		os.RemoveAll(filepath.Join(in.Resolved.TaskDir, "sub"))
	})
}

// fixDemoTask fixes the demo task's bug on disk and returns what undoes
// it: the original words.c with its original time, so the student's Neovim,
// which holds the file with unsaved edits, sees no change on disk, and no
// fixed test binary is left for a later make to trust.
func fixDemoTask(t *testing.T, taskDir string) (restore func()) {
	t.Helper()
	words := filepath.Join(taskDir, "words.c")
	orig, err := os.ReadFile(words)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(words)
	if err != nil {
		t.Fatal(err)
	}
	if err := demotask.Fix(taskDir); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.WriteFile(words, orig, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(words, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(taskDir, "test_words")); err != nil {
			t.Fatal(err)
		}
	}
}
