package mcpserver_test

// Session events from what the student does by hand: the task's build or
// test command typed in a shell pane.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// watchEvents records every stem.events notification.
func watchEvents(s *session) chan map[string]any {
	ch := make(chan map[string]any, 256)
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/message" || n.Params.AdditionalFields["logger"] != "stem.events" {
			return
		}
		var ev map[string]any
		b, _ := json.Marshal(n.Params.AdditionalFields["data"])
		json.Unmarshal(b, &ev)
		select {
		case ch <- ev:
		default:
		}
	})
	return ch
}

// nextEvent returns the next notified event from pane; the events skipped
// on the way are returned too.
func nextEvent(t *testing.T, ch chan map[string]any, pane string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-ch:
			if str(ev["pane"]) == pane {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event from pane %s within %v", pane, timeout)
		}
	}
}

// TestStudentBuildEvents: the task's build or test command typed by the
// student in a shell pane (not through task_action) that fails sends
// build_failed / test_failed with make's exit code; the same command
// succeeding is program_exited with its action, and other commands keep no
// action.
func TestStudentBuildEvents(t *testing.T) {
	for _, p := range []string{"gcc", "make"} {
		needs.Program(t, p, "gcc make")
	}
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "observe")
	evs := watchEvents(s)
	shell := st.pane("shell")
	// The server watches the pane from the session's start; the prompt
	// may be drawn before or after that.
	st.waitPrompt(shell)
	s.ok("session_status", nil)
	words := filepath.Join(in.Resolved.TaskDir, "words.c")
	good := mustRead(t, words)
	if err := os.WriteFile(words, []byte(good+"\nint broken( {\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	typeCommand := func(line string) map[string]any {
		t.Helper()
		st.waitPrompt(shell)
		st.run(shell, line)
		return nextEvent(t, evs, shell, 20*time.Second)
	}
	// A prompt drawn before the server watched the pane hides the line
	// typed at it (unknown: no action); the server starts watching as the
	// session begins, so the first prompt may or may not be seen. Every
	// later prompt is.
	if ev := typeCommand("make"); !(str(ev["type"]) == "program_exited" && str(ev["action"]) == "") &&
		!(str(ev["type"]) == "build_failed" && str(ev["action"]) == "build") {
		t.Errorf("make at the first prompt: %s", mustJSON(ev))
	}
	for _, tc := range []struct {
		line, typ, action string
		code              int
	}{
		{"make", "build_failed", "build", 2},
		{"  make test ", "test_failed", "test", 2},
		// Not the task's commands: no action, no build event.
		{"make -s", "program_exited", "", 2},
		{"make; true", "program_exited", "", 0},
		{"echo make", "program_exited", "", 0},
	} {
		ev := typeCommand(tc.line)
		if str(ev["type"]) != tc.typ || str(ev["action"]) != tc.action || ev["exit_code"] == nil || num(ev["exit_code"]) != tc.code ||
			str(ev["instance"]) != in.Name {
			t.Errorf("%q: event %s, want type %s, action %q, exit code %d", tc.line, mustJSON(ev), tc.typ, tc.action, tc.code)
		}
	}
	// An edited line counts as what it ends up being.
	st.waitPrompt(shell)
	in.Tmux(t, "send-keys", "-t", shell, "-l", "makx")
	in.Tmux(t, "send-keys", "-t", shell, "BSpace")
	st.run(shell, "e")
	if ev := nextEvent(t, evs, shell, 20*time.Second); str(ev["type"]) != "build_failed" || num(ev["exit_code"]) != 2 {
		t.Errorf("an edited make: %s", mustJSON(ev))
	}

	// Fixed: the build succeeds, still known as the build.
	if err := os.WriteFile(words, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := typeCommand("make"); str(ev["type"]) != "program_exited" || str(ev["action"]) != "build" || num(ev["exit_code"]) != 0 {
		t.Errorf("a good build: %s", mustJSON(ev))
	}
	// session_events has the same events.
	var types []string
	for _, e := range mustSlice(s.ok("session_events", nil)["events"]) {
		if str(get(e, "pane")) == shell {
			types = append(types, str(get(e, "type")))
		}
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "program_exited build_failed test_failed program_exited") &&
		!strings.HasPrefix(got, "build_failed build_failed test_failed program_exited") {
		t.Errorf("session_events: %s", got)
	}
}

// TestProgramPaneEvents: the debug layout's program pane (the command
// stemctl debug runs there for a debug_program, instance.ProgramPaneArgv)
// reports its program's end with the shell integration's marks and its real
// wait status: a program killed by SIGSEGV is program_crashed with the
// signal, one calling exit(139) is program_exited with exit code 139 and no
// signal, SIGKILL is named but no crash; the event names the pane's role
// even for a program that ends at once. A watcher that connected while the
// program ran still sees it end; a forged stem-wait mark (unknown key) in a
// shell pane changes nothing; without perl the pane's bash reports the
// status alone.
func TestProgramPaneEvents(t *testing.T) {
	for _, p := range []string{"perl", "bash", "sh"} {
		needs.Program(t, p, p)
	}
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "observe")
	evs := watchEvents(s)
	s.ok("session_status", nil) // the server watches panes from here on
	open := func(prog string, env ...string) string {
		t.Helper()
		args := []string{"new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "stem:", "-c", in.Resolved.TaskDir, "--"}
		if len(env) > 0 {
			// (tmux gives a new pane the client's PATH, whatever -e says.)
			args = append(append(args, "/usr/bin/env"), env...)
		}
		// The script from this checkout, where the images install it.
		argv := instance.ProgramPaneArgv(prog)
		argv[1] = filepath.Join(testenv.RepoRoot(), "containers", "files", "debug", "program-pane")
		return strings.TrimSpace(in.Tmux(t, append(args, argv...)...))
	}
	check := func(what string, ev map[string]any, typ string, code int, sig string) {
		t.Helper()
		if str(ev["type"]) != typ || ev["exit_code"] == nil || num(ev["exit_code"]) != code || str(ev["signal"]) != sig ||
			str(ev["role"]) != "program" || str(ev["action"]) != "" || str(ev["instance"]) != in.Name {
			t.Errorf("%s: event %s, want %s exit code %d signal %q role program", what, mustJSON(ev), typ, code, sig)
		}
	}
	for _, tc := range []struct {
		prog, typ string
		code      int
		sig, says string
	}{
		{`sh -c 'kill -SEGV $$'`, "program_crashed", 139, "SIGSEGV", `was killed by signal 11 \(SIGSEGV\)`},
		{`sh -c 'exit 139'`, "program_exited", 139, "", `exited with status 139`},
		{`true && sh -c 'kill -KILL $$'`, "program_exited", 137, "SIGKILL", `was killed by signal 9 \(SIGKILL\)`},
		{`printf 'out\n'; exit 3`, "program_exited", 3, "", `exited with status 3`},
	} {
		p := open(tc.prog)
		check(tc.prog, nextEvent(t, evs, p, 20*time.Second), tc.typ, tc.code, tc.sig)
		// The pane then says so and is a shell.
		st.waitPane(p, `\[stem\] the program `+tc.says, 10*time.Second)
		waitUntil(t, 10*time.Second, "an interactive shell in the program pane", func() bool {
			return strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", p, "#{pane_current_command}")) == "bash"
		})
	}

	// A program running before a watcher connected: its end is seen.
	p := open(`read -r x; sh -c 'kill -ABRT $$'`)
	waitUntil(t, 10*time.Second, "the program pane's shell set its role", func() bool {
		return strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", p, "#{@stem_role}")) == "program"
	})
	// perl prints the start marks, then starts the program: once the
	// program runs, the marks were written before the watcher connects.
	pid := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", p, "#{pane_pid}"))
	waitUntil(t, 10*time.Second, "the program runs under the pane's perl", func() bool {
		kids, _ := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		return len(strings.TrimSpace(string(kids))) > 0
	})
	s2 := connect(t, in, "observe")
	evs2 := watchEvents(s2)
	s2.ok("session_status", nil) // it subscribes to the panes before it answers
	in.Tmux(t, "send-keys", "-t", p, "Enter")
	check("a late watcher", nextEvent(t, evs2, p, 20*time.Second), "program_crashed", 134, "SIGABRT")

	// A stem-wait mark printed by a program (its key is not the pane's)
	// in a shell pane: the crash is still a crash.
	shell := st.pane("shell")
	st.waitPrompt(shell)
	st.run(shell, `printf '\033]133;stem-wait;139;0;0123456789abcdef\007'; sh -c 'kill -SEGV $$'`)
	if ev := nextEvent(t, evs, shell, 20*time.Second); str(ev["type"]) != "program_crashed" || str(ev["signal"]) != "SIGSEGV" {
		t.Errorf("a forged stem-wait mark: %s", mustJSON(ev))
	}

	// Without perl: the marks without the wait status.
	bin := t.TempDir()
	for _, prog := range []string{"bash", "sh", "tmux"} {
		path, _ := exec.LookPath(prog)
		if err := os.Symlink(path, filepath.Join(bin, prog)); err != nil {
			t.Fatal(err)
		}
	}
	p = open(`sh -c 'kill -SEGV $$'`, "PATH="+bin)
	check("without perl", nextEvent(t, evs, p, 20*time.Second), "program_crashed", 139, "SIGSEGV")
	st.waitPane(p, `\[stem\] the program exited with status 139`, 10*time.Second)
}
