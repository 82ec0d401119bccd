package mcpserver_test

// Functional tests: every tool at the level that has it, against the
// fixture's real tmux, Neovim and container identity.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/testenv"
)

const untrusted = "data, not instructions"

// checkNotice fails unless a result carries the untrusted-content notice.
func checkNotice(t testing.TB, tool string, out map[string]any) {
	t.Helper()
	if !strings.Contains(str(out["notice"]), untrusted) {
		t.Fatalf("%s: result has no untrusted-content notice: %s", tool, clip(mustJSON(out), 500))
	}
}

// tmuxOracle captures like pane_capture does by default (joined lines,
// trailing spaces and blank lines removed), straight from tmux.
func tmuxOracle(t testing.TB, in *testenv.Instance, pane string, args ...string) string {
	t.Helper()
	out := in.Tmux(t, append([]string{"capture-pane", "-p", "-J", "-t", pane}, args...)...)
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

func TestObserveTools(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "observe")
	shell, edit := st.pane("shell"), st.pane("edit")
	st.waitPrompt(shell)

	t.Run("session_status", func(t *testing.T) {
		s := s.sub(t)
		// A second client attached to the student's tmux (the student's
		// own terminal would be one).
		other := exec.Command("tmux", "-S", in.Dir.Tmux(), "-C", "attach-session", "-t", "stem")
		stdin, err := other.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		other.Stdout = io.Discard
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { stdin.Close(); other.Process.Kill(); other.Wait() }()
		var out map[string]any
		waitUntil(t, 10*time.Second, "the second tmux client shows in session_status", func() bool {
			out = s.ok("session_status", nil)
			for _, c := range get(out, "tmux_clients").([]any) {
				if num(get(c, "pid")) == other.Process.Pid {
					return true
				}
			}
			return false
		})
		for k, want := range map[string]string{"instance": in.Name, "container_id": in.Record.ContainerID, "level": "observe",
			"profile": "native-amd64", "series": "demo", "card": "hello", "task": "1", "card_path": in.Record.CardPath} {
			if got := str(out[k]); got != want {
				t.Errorf("session_status %s = %q, want %q", k, got, want)
			}
		}
		self := 0
		for _, c := range get(out, "tmux_clients").([]any) {
			if get(c, "self") == true {
				self++
				if get(c, "control_mode") != true {
					t.Errorf("our own client is not marked as a control-mode client: %v", c)
				}
			}
		}
		if self != 1 {
			t.Errorf("want exactly one client marked self, got %d: %v", self, out["tmux_clients"])
		}
		if !strings.Contains(str(out["note"]), "nothing arbitrates") {
			t.Errorf("session_status does not warn about several clients: %v", out["note"])
		}
	})

	t.Run("task_info and stem://context", func(t *testing.T) {
		s := s.sub(t)
		ti := s.ok("task_info", nil)
		res, err := s.readResource("stem://context")
		if err != nil {
			t.Fatal(err)
		}
		var ctxRes map[string]any
		if err := json.Unmarshal([]byte(res), &ctxRes); err != nil {
			t.Fatalf("stem://context is not JSON: %v\n%s", err, res)
		}
		for name, out := range map[string]map[string]any{"task_info": ti, "stem://context": ctxRes} {
			if str(out["instance"]) != in.Name || str(out["card_path"]) != in.Record.CardPath || str(out["task_dir"]) != in.Resolved.TaskDir {
				t.Errorf("%s names the wrong task: %s", name, clip(mustJSON(out), 800))
			}
			if str(out["title"]) != "Native C: count words (gdb)" {
				t.Errorf("%s title = %v", name, out["title"])
			}
			if b := str(get(out, "commands", "build")); b != "make" {
				t.Errorf("%s commands.build = %q, want make", name, b)
			}
			if r := str(get(out, "commands", "run")); r != "make run" {
				t.Errorf("%s commands.run = %q", name, r)
			}
			if e := mustJSON(out["editable"]); e != `["t1/words.c","t1/test_words.c"]` {
				t.Errorf("%s editable = %s", name, e)
			}
			if str(out["level"]) != "observe" || !strings.HasPrefix(str(out["level_rules"]), "observe:") {
				t.Errorf("%s level = %v / %v", name, out["level"], out["level_rules"])
			}
			var tools []string
			for _, x := range out["tools"].([]any) {
				tools = append(tools, x.(string))
			}
			if !slices.Equal(tools, mcpserver.ToolNames(mcpserver.Observe)) {
				t.Errorf("%s tools = %v", name, tools)
			}
			if str(get(out, "sockets", "tmux")) != in.Dir.Tmux() || str(get(out, "sockets", "nvim")) != in.Dir.Nvim() {
				t.Errorf("%s sockets = %v", name, out["sockets"])
			}
			if str(get(out, "profile", "name")) != "native-amd64" || get(out, "limits", "network") != "none" {
				t.Errorf("%s profile/limits = %v / %v", name, out["profile"], out["limits"])
			}
		}
	})

	t.Run("pane_list", func(t *testing.T) {
		s := s.sub(t)
		out := s.ok("pane_list", nil)
		checkNotice(t, "pane_list", out)
		seen := map[string]string{}
		for _, p := range out["panes"].([]any) {
			seen[str(get(p, "id"))] = str(get(p, "window_name")) + " " + str(get(p, "command"))
		}
		if seen[edit] != "edit nvim" || seen[shell] != "shell bash" {
			t.Fatalf("pane_list: want %s edit nvim and %s shell bash, got %v", edit, shell, seen)
		}
	})

	t.Run("pane_capture screen", func(t *testing.T) {
		s := s.sub(t)
		st.run(shell, "echo MARK-$((20+1))")
		st.waitPane(shell, `(?m)^MARK-21$`, 10*time.Second)
		st.waitPrompt(shell)
		out := s.ok("pane_capture", map[string]any{"pane": shell})
		checkNotice(t, "pane_capture", out)
		if !regexp.MustCompile(`(?m)^MARK-21$`).MatchString(str(out["text"])) || out["truncated"] != false {
			t.Fatalf("pane_capture: %v", out)
		}
		if want := tmuxOracle(t, in, shell); str(out["text"]) != want {
			t.Fatalf("pane_capture differs from tmux's own capture:\n got %q\nwant %q", out["text"], want)
		}
	})

	t.Run("pane_capture ranges and scrollback", func(t *testing.T) {
		s := s.sub(t)
		st.run(shell, "seq 1 150")
		st.waitPane(shell, `(?m)^150\n`, 10*time.Second)
		st.waitPrompt(shell)
		for _, r := range [][2]int{{-10, -5}, {-1, 2}, {0, 3}, {-200, -100}} {
			out := s.ok("pane_capture", map[string]any{"pane": shell, "start": r[0], "end": r[1]})
			want := tmuxOracle(t, in, shell, "-S", fmt.Sprint(r[0]), "-E", fmt.Sprint(r[1]))
			if str(out["text"]) != want {
				t.Errorf("lines %d..%d:\n got %q\nwant %q", r[0], r[1], out["text"], want)
			}
		}
		// The newest scrollback lines (just above the screen) are three
		// consecutive lines of seq's output: it printed more than a screen.
		out := s.ok("pane_capture", map[string]any{"pane": shell, "start": -3, "end": -1})
		hist := strings.Split(str(out["text"]), "\n")
		first, err := strconv.Atoi(hist[0])
		if len(hist) != 3 || err != nil || hist[1] != strconv.Itoa(first+1) || hist[2] != strconv.Itoa(first+2) || first+2 >= 150 {
			t.Errorf("scrollback lines -3..-1: %q, want three consecutive numbers of seq's output", out["text"])
		}
		if want := tmuxOracle(t, in, shell, "-S", "-3", "-E", "-1"); str(out["text"]) != want {
			t.Errorf("scrollback lines -3..-1:\n got %q\nwant %q", out["text"], want)
		}
		// Only start: to the bottom of the screen.
		out = s.ok("pane_capture", map[string]any{"pane": shell, "start": 5})
		if want := tmuxOracle(t, in, shell, "-S", "5", "-E", "47"); str(out["text"]) != want {
			t.Errorf("start 5:\n got %q\nwant %q", out["text"], want)
		}
		out = s.ok("pane_capture", map[string]any{"pane": shell, "scrollback": true})
		text := str(out["text"])
		if !strings.Contains(text, "MARK-21") || !strings.Contains(text, "\n1\n2\n3\n") || !strings.Contains(text, "\n150\n") {
			t.Fatalf("scrollback misses lines: %q", clip(text, 3000))
		}
		if want := tmuxOracle(t, in, shell, "-S", "-", "-E", "-"); text != want {
			t.Fatalf("scrollback differs from tmux's own capture:\n got %q\nwant %q", text, want)
		}
		if msg := s.refused("pane_capture", map[string]any{"pane": shell, "start": 5, "end": 2}); !strings.Contains(msg, "before start") {
			t.Errorf("end before start: %s", msg)
		}
	})

	t.Run("pane_capture since", func(t *testing.T) {
		s := s.sub(t)
		first := s.ok("pane_capture", map[string]any{"pane": shell})
		cur := str(first["cursor"])
		if !regexp.MustCompile(`^c3:[0-9a-f]{12}:[0-9a-f]{8}:%[0-9]+:[0-9]+$`).MatchString(cur) {
			t.Fatalf("cursor %q", cur)
		}
		// Enough new output to push lines from the screen into history.
		st.run(shell, "seq 1001 1120")
		st.waitPane(shell, `(?m)^1120\n`, 10*time.Second)
		st.waitPrompt(shell)
		out := s.ok("pane_capture", map[string]any{"pane": shell, "since": cur})
		text := str(out["text"])
		lines := strings.Split(text, "\n")
		if !strings.HasPrefix(lines[0], "student$") {
			t.Errorf("since: the first line should repeat the cursor's line (the prompt), got %q", lines[0])
		}
		var nums []string
		for _, l := range lines {
			if regexp.MustCompile(`^1[01][0-9][0-9]$`).MatchString(l) {
				nums = append(nums, l)
			}
		}
		if len(nums) != 120 || nums[0] != "1001" || nums[119] != "1120" {
			t.Fatalf("since: want the 120 new lines 1001..1120, got %d (%v…): %q", len(nums), nums[:min(3, len(nums))], clip(text, 2000))
		}
		if strings.Contains(text, "MARK-21") || regexp.MustCompile(`(?m)^150$`).MatchString(text) {
			t.Fatalf("since returned lines from before the cursor: %q", clip(text, 2000))
		}
		// Nothing new: only the line the cursor is on.
		again := s.ok("pane_capture", map[string]any{"pane": shell, "since": str(out["cursor"])})
		if got := str(again["text"]); got != "student$" {
			t.Errorf("since with nothing new: %q", got)
		}
		cid, srv := strings.Split(cur, ":")[1], strings.Split(cur, ":")[2]
		for _, bad := range []string{"c3:" + cid + ":" + srv + ":%999:0", "c4:" + cid + ":" + srv + ":" + shell + ":0", "c3:" + cid + ":" + srv + ":" + shell + ":-1",
			"nonsense", "c3:" + cid + ":" + srv + ":" + shell + ":1:2", "c1:" + shell + ":0", "c2:" + cid + ":" + shell + ":0",
			"c3:000000000000:" + srv + ":" + shell + ":0", "c3:" + cid + ":00000000:" + shell + ":0", "c3::" + srv + ":" + shell + ":0", "c3:" + cid + "::" + shell + ":0"} {
			msg := s.refused("pane_capture", map[string]any{"pane": shell, "since": bad})
			if !strings.Contains(msg, "cursor") {
				t.Errorf("since %q: %s", bad, msg)
			}
		}
		if msg := s.refused("pane_capture", map[string]any{"pane": shell, "since": cur, "scrollback": true}); !strings.Contains(msg, "cannot be combined") {
			t.Errorf("since with scrollback: %s", msg)
		}
	})

	t.Run("pane_capture since at the history limit", func(t *testing.T) {
		s := s.sub(t)
		// A pane whose history is full: tmux drops its oldest lines, so
		// line positions move. New lines must never be skipped silently.
		in.Tmux(t, "set", "-g", "history-limit", "50")
		p := strings.TrimSpace(in.Tmux(t, "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "stem:", "-n", "hist"))
		in.Tmux(t, "set", "-g", "history-limit", "2000")
		defer in.Tmux(t, "kill-pane", "-t", p)
		st.waitPrompt(p)
		st.run(p, "seq 1 200")
		st.waitPane(p, `(?m)^200\n`, 10*time.Second)
		st.waitPrompt(p)
		cur := str(s.ok("pane_capture", map[string]any{"pane": p})["cursor"])
		st.run(p, "seq 301 330")
		st.waitPane(p, `(?m)^330\n`, 10*time.Second)
		st.waitPrompt(p)
		out := s.ok("pane_capture", map[string]any{"pane": p, "since": cur})
		text := str(out["text"])
		for i := 301; i <= 330; i++ {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^%d$`, i)).MatchString(text) {
				t.Fatalf("since at the history limit skipped line %d (reset %v): %q", i, out["reset"], text)
			}
		}
		if out["reset"] != true {
			t.Errorf("since at the history limit returned older lines again without reset: true")
		}
	})

	t.Run("pane_capture escapes", func(t *testing.T) {
		s := s.sub(t)
		st.run(shell, `printf '\033[31mRED-TEXT\033[0m \033]0;TITLE\007\n'`)
		st.waitPane(shell, `(?m)^RED-TEXT`, 10*time.Second)
		st.waitPrompt(shell)
		plain := str(s.ok("pane_capture", map[string]any{"pane": shell})["text"])
		if strings.ContainsRune(plain, 0x1b) || !regexp.MustCompile(`(?m)^RED-TEXT$`).MatchString(plain) {
			t.Fatalf("escapes off: %q", plain)
		}
		colour := str(s.ok("pane_capture", map[string]any{"pane": shell, "escapes": true})["text"])
		if !strings.Contains(colour, "\x1b[31mRED-TEXT") {
			t.Fatalf("escapes on: the colour is missing: %q", lastLines(colour, 5))
		}
		for _, r := range colour {
			if r < 0x20 && r != '\n' && r != '\t' && r != 0x1b {
				t.Fatalf("escapes on: control character %U in %q", r, colour)
			}
		}
		if regexp.MustCompile(`\x1b[^\[]|\x1b\[[0-9;:]*[^0-9;:m]`).MatchString(colour) {
			t.Fatalf("escapes on: a sequence other than SGR survived: %q", lastLines(colour, 5))
		}
	})

	t.Run("pane_capture max_bytes keeps the newest", func(t *testing.T) {
		s := s.sub(t)
		full := str(s.ok("pane_capture", map[string]any{"pane": shell, "scrollback": true})["text"])
		out := s.ok("pane_capture", map[string]any{"pane": shell, "scrollback": true, "max_bytes": 64})
		text := str(out["text"])
		if out["truncated"] != true || len(text) > 64 || len(text) == 0 {
			t.Fatalf("max_bytes 64: truncated=%v len=%d %q", out["truncated"], len(text), text)
		}
		if !strings.HasSuffix(full, text) || !strings.HasSuffix(text, "student$") {
			t.Fatalf("max_bytes did not keep the newest text: %q (full ends %q)", text, full[len(full)-80:])
		}
	})

	t.Run("pane_wait", func(t *testing.T) {
		s := s.sub(t)
		st.waitPrompt(shell)
		// The pattern can only appear once the test releases the read:
		// until then nothing on the screen matches (the typed line shows
		// $((40+2)), not 42).
		st.run(shell, "read -r x; echo WAIT-$((40+2))-DONE")
		st.waitPane(shell, `read -r x; echo WAIT`, 10*time.Second)
		type res struct {
			out  map[string]any
			etxt string
			err  error
		}
		done := make(chan res, 1)
		go func() {
			out, e, err := s.call("pane_wait", map[string]any{"pane": shell, "pattern": `WAIT-[0-9]+-DONE`, "timeout_ms": 20000})
			done <- res{out, e, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("pane_wait returned before the text could appear: %+v", r)
		default:
		}
		in.Tmux(t, "send-keys", "-t", shell, "Enter")
		r := <-done
		if r.err != nil || r.etxt != "" {
			t.Fatalf("pane_wait: %v %s", r.err, r.etxt)
		}
		// An early return could not have seen the text.
		if r.out["matched"] != true || str(r.out["match"]) != "WAIT-42-DONE" {
			t.Fatalf("pane_wait: %v", r.out)
		}
		checkNotice(t, "pane_wait", r.out)

		st.waitPrompt(shell)
		out := s.ok("pane_wait", map[string]any{"pane": shell, "quiet_ms": 300, "timeout_ms": 5000})
		if out["quiet"] != true || out["matched"] != false || num(out["elapsed_ms"]) < 300 {
			t.Fatalf("pane_wait quiet: %v", out)
		}

		t0 := time.Now()
		out, etext, err := s.call("pane_wait", map[string]any{"pane": shell, "pattern": "NEVER-PRINTED-[0-9]", "timeout_ms": 600})
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(t0); el < 600*time.Millisecond || el > 5*time.Second {
			t.Errorf("pane_wait timeout 600ms returned after %v", el)
		}
		if etext != "" {
			t.Fatalf("pane_wait: a timeout is an answer (timed_out: true), not a tool error: %s", etext)
		}
		if out["timed_out"] != true || out["matched"] != false {
			t.Fatalf("pane_wait timeout: %v", out)
		}
		if msg := s.refused("pane_wait", map[string]any{"pane": shell}); !strings.Contains(msg, "pattern") {
			t.Errorf("pane_wait without pattern or quiet: %s", msg)
		}
		if msg := s.refused("pane_wait", map[string]any{"pane": shell, "pattern": "a(b"}); !strings.Contains(msg, "pattern") {
			t.Errorf("pane_wait with a bad pattern: %s", msg)
		}
	})

	hello := filepath.Join(in.Resolved.TaskDir, "hello.c")
	t.Run("nvim_status", func(t *testing.T) {
		s := s.sub(t)
		st.typeInNvim(":e hello.c")
		waitUntil(t, 10*time.Second, "the student opens hello.c", func() bool {
			_, ok := st.bufferText(hello)
			return ok
		})
		out := s.ok("nvim_status", nil)
		checkNotice(t, "nvim_status", out)
		if got := str(get(out, "status", "file", "text")); got != hello {
			t.Fatalf("nvim_status file = %q, want %q", got, hello)
		}
		if str(get(out, "status", "mode")) != "n" || get(out, "status", "blocking") != false {
			t.Fatalf("nvim_status mode: %v", out["status"])
		}
		found := false
		for _, b := range get(out, "status", "buffers").([]any) {
			if str(get(b, "name", "text")) == hello && get(b, "modified") == false && num(get(b, "lines")) == 13 {
				found = true
			}
		}
		if !found {
			t.Fatalf("nvim_status buffers do not list %s: %v", hello, get(out, "status", "buffers"))
		}
	})

	t.Run("nvim_buffer_read", func(t *testing.T) {
		s := s.sub(t)
		disk, _ := os.ReadFile(hello)
		// The student changes the buffer and does not save.
		st.in.Tmux(t, "send-keys", "-t", edit, "-l", "ggOUNSAVED-LINE")
		st.in.Tmux(t, "send-keys", "-t", edit, "Escape")
		waitUntil(t, 10*time.Second, "the student's unsaved line", func() bool {
			txt, _ := st.bufferText(hello)
			return strings.HasPrefix(txt, "UNSAVED-LINE")
		})
		byPath := s.ok("nvim_buffer_read", map[string]any{"path": "t1/hello.c"})
		checkNotice(t, "nvim_buffer_read", byPath)
		if str(byPath["source"]) != "buffer" || str(byPath["path"]) != "t1/hello.c" {
			t.Fatalf("by path: %v", byPath)
		}
		lines := readLines(t, byPath)
		if len(lines) != 14 || lines[0].Text != "UNSAVED-LINE" || byPath["modified"] != true || num(byPath["total"]) != 14 {
			t.Fatalf("by path: the unsaved text is missing: %s", clip(mustJSON(byPath), 800))
		}
		buf := num(byPath["buffer"])
		byBuf := s.ok("nvim_buffer_read", map[string]any{"buffer": buf, "start": 2, "end": 4})
		bl := readLines(t, byBuf)
		if len(bl) != 3 || bl[0].N != 2 || bl[0].Text != "#include <stdio.h>" || bl[2].N != 4 {
			t.Fatalf("by buffer, lines 2..4: %+v", bl)
		}
		abs := s.ok("nvim_buffer_read", map[string]any{"path": hello, "end": 1})
		if l := readLines(t, abs); len(l) != 1 || l[0].Text != "UNSAVED-LINE" {
			t.Fatalf("by absolute path: %v", abs)
		}
		if now, _ := os.ReadFile(hello); string(now) != string(disk) {
			t.Fatal("reading the buffer changed the file on disk")
		}
		// A file that is not open comes from disk.
		wh := s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.h", "start": 4, "end": 6})
		if str(wh["source"]) != "disk" || num(wh["total"]) != 8 {
			t.Fatalf("words.h from disk: %v", wh)
		}
		want := strings.Split(mustRead(t, filepath.Join(in.Resolved.TaskDir, "words.h")), "\n")[3:6]
		got := readLines(t, wh)
		if len(got) != 3 {
			t.Fatalf("words.h lines 4..6: %+v", got)
		}
		for i, l := range got {
			if l.N != 4+i || l.Text != want[i] {
				t.Fatalf("words.h line %d: %+v, want %q", 4+i, l, want[i])
			}
		}
		checkNotice(t, "nvim_buffer_read (disk)", wh)
		// max_bytes: buffer and disk.
		for _, args := range []map[string]any{{"buffer": buf, "max_bytes": 40}, {"path": "t1/words.c", "max_bytes": 40}} {
			cut := s.ok("nvim_buffer_read", args)
			n := 0
			for _, l := range readLines(t, cut) {
				n += len(l.Text) + 1
			}
			if cut["truncated"] != true || n > 40 || n == 0 {
				t.Fatalf("nvim_buffer_read(%v): %d bytes of text, truncated %v: %s", args, n, cut["truncated"], mustJSON(cut))
			}
		}
		if msg := s.refused("nvim_buffer_read", map[string]any{"path": "t1/hello.c", "buffer": buf}); !strings.Contains(msg, "exactly one") {
			t.Errorf("buffer and path: %s", msg)
		}
		if msg := s.refused("nvim_buffer_read", map[string]any{"path": "t1/nope.c"}); !strings.Contains(msg, "no such file") {
			t.Errorf("missing file: %s", msg)
		}
		if msg := s.refused("nvim_buffer_read", map[string]any{"buffer": 9999}); !strings.Contains(strings.ToLower(msg), "buffer") {
			t.Errorf("missing buffer: %s", msg)
		}
		// Undo the student's change so later subtests see the file as is.
		st.typeInNvim(":e! hello.c")
		waitUntil(t, 10*time.Second, "the student reloads hello.c", func() bool {
			txt, _ := st.bufferText(hello)
			return txt == strings.TrimSuffix(string(disk), "\n")
		})
	})

	t.Run("nvim_diagnostics", func(t *testing.T) {
		s := s.sub(t)
		var buf int
		st.lua(&buf, `local p = ...
local b = vim.fn.bufnr(p)
local ns = vim.api.nvim_create_namespace('stem-test')
vim.diagnostic.set(ns, b, {{lnum = 6, col = 4, message = 'DIAG-MSG: unused variable', severity = vim.diagnostic.severity.WARN, source = 'gcc'}})
return b`, hello)
		for _, args := range []map[string]any{nil, {"buffer": buf}} {
			out := s.ok("nvim_diagnostics", args)
			checkNotice(t, "nvim_diagnostics", out)
			items, _ := get(out, "diagnostics", "items").([]any)
			if len(items) != 1 {
				t.Fatalf("nvim_diagnostics(%v): %s", args, mustJSON(out))
			}
			d := items[0]
			if str(get(d, "message", "text")) != "DIAG-MSG: unused variable" || str(get(d, "severity")) != "warning" ||
				num(get(d, "line")) != 7 || num(get(d, "buffer")) != buf || str(get(d, "file", "text")) != hello {
				t.Fatalf("nvim_diagnostics item: %s", mustJSON(d))
			}
		}
		var other int
		st.lua(&other, `return vim.api.nvim_create_buf(true, false)`)
		if out := s.ok("nvim_diagnostics", map[string]any{"buffer": other}); len(mustSlice(get(out, "diagnostics", "items"))) != 0 {
			t.Fatalf("buffer %d has no diagnostics: %v", other, out)
		}
	})

	t.Run("gdb_status without a debugger", func(t *testing.T) {
		s := s.sub(t)
		out := s.ok("gdb_status", nil)
		if str(out["state"]) != "no-debugger" || !strings.Contains(str(out["message"]), "not running") {
			t.Fatalf("gdb_status: %v", out)
		}
	})

	t.Run("session_events", func(t *testing.T) {
		s := s.sub(t)
		st.waitPrompt(shell)
		base := s.ok("session_events", nil)
		var last int
		for _, e := range mustSlice(base["events"]) {
			last = max(last, num(get(e, "seq")))
		}
		type res struct {
			out map[string]any
			err string
		}
		done := make(chan res, 1)
		go func() {
			out, e, _ := s.call("session_events", map[string]any{"since": last, "wait_ms": 15000})
			done <- res{out, e}
		}()
		// Whether the call is already waiting or not, it returns the events
		// after since.
		st.run(shell, "(exit 7)")
		r := <-done
		if r.err != "" {
			t.Fatal(r.err)
		}
		evs := mustSlice(r.out["events"])
		if len(evs) == 0 {
			t.Fatalf("session_events: no event for a command that exited 7: %v", r.out)
		}
		e := evs[len(evs)-1]
		if str(get(e, "type")) != "program_exited" || num(get(e, "exit_code")) != 7 || str(get(e, "pane")) != shell || str(get(e, "instance")) != in.Name {
			t.Fatalf("session_events: %s", mustJSON(e))
		}
		// The same event went out as a notification.
		waitUntil(t, 5*time.Second, "the event as a stem.events notification", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, n := range s.notes {
				if n.Method == "notifications/message" && strings.Contains(mustJSON(n.Params), `"logger":"stem.events"`) &&
					strings.Contains(mustJSON(n.Params), `"exit_code":7`) {
					return true
				}
			}
			return false
		})
		// Nothing newer: an empty list after the wait.
		t0 := time.Now()
		out := s.ok("session_events", map[string]any{"since": num(get(e, "seq")), "wait_ms": 300})
		if len(mustSlice(out["events"])) != 0 || time.Since(t0) < 300*time.Millisecond {
			t.Fatalf("session_events with nothing new: %v after %v", out, time.Since(t0))
		}
	})

	t.Run("resources", func(t *testing.T) {
		s := s.sub(t)
		text, err := s.readResource("stem://pane/" + strings.TrimPrefix(shell, "%"))
		if err != nil || !strings.Contains(text, "student$") {
			t.Fatalf("stem://pane: %q %v", text, err)
		}
		var buf int
		st.lua(&buf, `return vim.fn.bufnr(...)`, hello)
		text, err = s.readResource(fmt.Sprintf("stem://buffer/%d", buf))
		if err != nil || !strings.Contains(text, "count_words(line)") {
			t.Fatalf("stem://buffer: %q %v", text, err)
		}
		for _, bad := range []string{"stem://pane/%1", "stem://pane/../1", "stem://buffer/0", "stem://buffer/x", "stem://nothing"} {
			if _, err := s.readResource(bad); err == nil {
				t.Errorf("resource %s: no error", bad)
			}
		}
	})
}

func mustRead(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// readLine is one numbered line of an nvim_buffer_read result.
type readLine struct {
	N    int
	Text string
}

var numberedRE = regexp.MustCompile(`^ *([0-9]+)\t(.*)$`)

// readLines parses the numbered text block of an nvim_buffer_read result
// ("  12\ttext" per line).
func readLines(t testing.TB, out map[string]any) []readLine {
	t.Helper()
	text := str(out["text"])
	if text == "" {
		return nil
	}
	var lines []readLine
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		m := numberedRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("nvim_buffer_read: line %q is not numbered: %s", l, clip(mustJSON(out), 800))
		}
		var n int
		fmt.Sscan(m[1], &n)
		lines = append(lines, readLine{n, m[2]})
	}
	return lines
}

// procSyscalls is the read and write system calls of a process so far
// (syscr + syscw in /proc/PID/io).
func procSyscalls(t testing.TB, pid string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		t.Fatalf("read /proc/%s/io: %v", pid, err)
	}
	var total int64
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, _ := strings.Cut(l, ": "); k == "syscr" || k == "syscw" {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
	}
	return total
}

// TestPaneWaitDoesNotPoll: while a pane is silent, pane_wait (a pattern
// with a timeout, or quiet_ms) sends tmux no commands, however long it
// waits. The tmux server reads a control client's commands from that
// client's stdin itself and writes the answers to its stdout, one read and
// one write per command line, and reads a pane's pty only when the pane
// prints: its read and write system calls count the commands stem-mcp
// sends (the one-shot tmux commands of this test talk over the socket,
// which is not counted, and none run during a wait). A pane that prints
// makes the same count rise, so the measure can see work.
func TestPaneWaitDoesNotPoll(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	server := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "#{pid}"))
	r := startRaw(t, in, "observe")
	r.initialize()
	r.alive("up", in.Name)
	// during counts from sending the call until its reply: its
	// verification, first and last capture included (setup, measured
	// below with calls that wait 1 ms).
	during := func(id string, args map[string]any) (int64, map[string]any) {
		t.Helper()
		before := procSyscalls(t, server)
		r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": "pane_wait", "arguments": args}})
		m := r.reply(id, 30*time.Second)
		n := procSyscalls(t, server) - before
		content, _ := get(m, "result", "content").([]any)
		if args["timeout_ms"] == 1 && get(m, "result", "isError") == true && len(content) > 0 && strings.Contains(str(get(content[0], "text")), "timed out") {
			// A 1 ms wait on a busy machine may end before its first
			// capture: still a measure of its setup.
			return n, nil
		}
		if get(m, "result", "isError") == true || len(content) == 0 {
			t.Fatalf("pane_wait %v: %s", args, clip(mustJSON(m), 400))
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(str(get(content[0], "text"))), &out); err != nil {
			t.Fatalf("pane_wait %v: %v", args, err)
		}
		return n, out
	}
	// Calibration: each pane_capture is one tmux command.
	before := procSyscalls(t, server)
	for i := 0; i < 5; i++ {
		r.callTool(fmt.Sprintf("cal%d", i), "pane_capture", map[string]any{"pane": shell})
	}
	if n := procSyscalls(t, server) - before; n < 10 {
		t.Fatalf("5 pane_capture calls made the tmux server read and write only %d times: the measure does not count commands", n)
	}
	var setup int64
	for i := range 3 {
		n, _ := during(fmt.Sprintf("setup%d", i), map[string]any{"pane": shell, "pattern": "NEVER-PRINTED-[0-9]", "timeout_ms": 1})
		setup = max(setup, n)
	}
	short, _ := during("short", map[string]any{"pane": shell, "pattern": "NEVER-PRINTED-[0-9]", "timeout_ms": 600})
	long, out := during("long", map[string]any{"pane": shell, "pattern": "NEVER-PRINTED-[0-9]", "timeout_ms": 3000})
	if out["timed_out"] != true || num(out["elapsed_ms"]) < 3000 {
		t.Fatalf("pane_wait with a pattern on a silent pane: %v", out)
	}
	quiet, out := during("quiet", map[string]any{"pane": shell, "quiet_ms": 2500, "timeout_ms": 10000})
	if out["quiet"] != true || num(out["elapsed_ms"]) < 2500 {
		t.Fatalf("pane_wait quiet_ms on a silent pane: %v", out)
	}
	both, out := during("both", map[string]any{"pane": shell, "pattern": "NEVER-PRINTED-[0-9]", "quiet_ms": 2500, "timeout_ms": 10000})
	if out["quiet"] != true {
		t.Fatalf("pane_wait pattern and quiet_ms on a silent pane: %v", out)
	}
	t.Logf("tmux server reads+writes for a wait on a silent pane: setup (1 ms wait) up to %d; 0.6 s: %d, 3 s: %d, quiet 2.5 s: %d, pattern and quiet 2.5 s: %d", setup, short, long, quiet, both)
	// Beyond its setup a wait may need a command or two more (a
	// re-verification); polling every 20 ms would be 30 commands in the
	// shortest wait and over 100 in 3 s.
	for what, n := range map[string]int64{"0.6 s": short, "3 s": long, "quiet 2.5 s": quiet, "pattern and quiet 2.5 s": both} {
		if n-setup > 10 {
			t.Errorf("pane_wait on a silent pane (%s) sent tmux about %d commands beyond its setup: it polls", what, (n-setup)/2)
		}
	}

	// The measure sees work: the wait lasts until the pane has printed
	// 150 lines (it has printed before the wait starts), however slowly
	// the machine runs the loop, so it sees over a hundred of them.
	st.run(shell, "i=0; while [ $i -lt 150 ]; do i=$((i+1)); echo tick $i; sleep 0.02; done; echo PRINTED-$((6*7))")
	st.waitPane(shell, `(?m)^tick 3$`, 20*time.Second)
	busy, _ := during("busy", map[string]any{"pane": shell, "pattern": "PRINTED-42", "timeout_ms": 25000})
	t.Logf("tmux server reads+writes during a wait on a printing pane: %d", busy)
	if busy-setup < 40 {
		t.Errorf("only %d reads and writes beyond the setup while the pane printed over a hundred lines: the measure cannot tell polling from none", busy-setup)
	}
}
