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
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed: apt-get install gcc make", p)
		}
	}
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "observe")
	evs := watchEvents(s)
	shell := st.pane("shell")
	s.ok("session_status", nil) // the server watches panes from here on
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
	// The prompt drawn before the server watched the pane hides the first
	// line typed at it (unknown: no action); every later prompt is seen.
	if ev := typeCommand("make"); str(ev["type"]) != "program_exited" || str(ev["action"]) != "" {
		t.Errorf("make at a prompt drawn before the server started: %s", mustJSON(ev))
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
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "program_exited build_failed test_failed program_exited") {
		t.Errorf("session_events: %s", got)
	}
}
