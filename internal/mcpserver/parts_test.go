package mcpserver_test

// Parts: each tool needs only the part of the session it uses. With the
// editor quit, broken or hostile, the terminal tools work and the editor's
// fail at once saying what is down and which command brings it back; with
// no debugger the editor's tools work. Each session here is connected
// after the fault, as a new agent (or the SSH gate's next connection) is.

import (
	"context"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/nvim/nvimtest"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/testenv"
)

// noSocketPath fails when a message shows the instance's socket directory.
func noSocketPath(t testing.TB, in *testenv.Instance, what, msg string) {
	t.Helper()
	if strings.Contains(msg, in.Dir.Path) || strings.Contains(msg, ".sock") {
		t.Errorf("%s names a socket path: %s", what, msg)
	}
}

// partState is session_status's entry for one part.
func partState(t testing.TB, st map[string]any, part string) (state, reason string) {
	t.Helper()
	p, ok := get(st, "parts", part).(map[string]any)
	if !ok {
		t.Fatalf("session_status has no parts.%s: %s", part, clip(mustJSON(st), 800))
	}
	return str(p["state"]), str(p["reason"]) + " " + str(p["fix"])
}

// waitNvimGone waits until nothing answers on the instance's n.sock.
func waitNvimGone(t testing.TB, in *testenv.Instance) {
	t.Helper()
	waitUntil(t, 10*time.Second, "Neovim to stop answering", func() bool {
		return probe.Nvim(context.Background(), in.Dir.Nvim()) != nil
	})
}

func TestPartsEditorQuit(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	st.run(shell, "echo STUDENT-AT-WORK")
	st.waitPane(shell, "(?m)^STUDENT-AT-WORK$", 10*time.Second)
	st.typeInNvim(":qa!")
	waitNvimGone(t, in)

	s := connect(t, in, "assist")
	panes := s.ok("pane_list", nil)
	if !strings.Contains(mustJSON(panes), shell) {
		t.Fatalf("pane_list with the editor quit lacks the shell pane %s: %s", shell, clip(mustJSON(panes), 600))
	}
	if text := str(s.ok("pane_capture", map[string]any{"pane": shell})["text"]); !strings.Contains(text, "STUDENT-AT-WORK") {
		t.Fatalf("pane_capture with the editor quit: %q", clip(text, 400))
	}
	for _, tool := range []string{"nvim_status", "nvim_buffer_read"} {
		args := map[string]any{}
		if tool == "nvim_buffer_read" {
			args["path"] = "t1/words.c"
		}
		t0 := time.Now()
		msg := s.refusedWith(errcode.PartDown, tool, args)
		t.Logf("%s with the editor quit (%v): %s", tool, time.Since(t0).Round(time.Millisecond), msg)
		if !strings.Contains(msg, "Neovim is not running in instance "+in.Name) || !strings.Contains(msg, "the student reopens it") || !strings.Contains(msg, "stemctl up native-amd64 demo hello 1") {
			t.Errorf("%s does not say the editor is down and how to bring it back: %s", tool, msg)
		}
		noSocketPath(t, in, tool, msg)
	}
	if text, err := s.readResource("stem://pane/" + strings.TrimPrefix(shell, "%")); err != nil || !strings.Contains(text, "STUDENT-AT-WORK") {
		t.Errorf("the pane resource with the editor quit: %v %q", err, clip(text, 300))
	}
	if _, err := s.readResource("stem://buffer/1"); err == nil || !strings.Contains(err.Error(), "Neovim is not running") {
		t.Errorf("the buffer resource with the editor quit: %v", err)
	} else {
		noSocketPath(t, in, "the buffer resource", err.Error())
	}
	status := s.ok("session_status", nil)
	if state, _ := partState(t, status, "tmux"); state != "up" {
		t.Errorf("tmux: %s", state)
	}
	if state, why := partState(t, status, "editor"); state != "down" || !strings.Contains(why, "not running") || !strings.Contains(why, "stemctl up") {
		t.Errorf("editor: %s %s", state, why)
	}
	if state, why := partState(t, status, "debugger"); state != "down" || !strings.Contains(why, "stemctl debug "+in.Name) {
		t.Errorf("debugger: %s %s", state, why)
	}
	noSocketPath(t, in, "session_status parts", mustJSON(get(status, "parts")))

	// The editor back: the same session's next call reaches it.
	in.StartNvim(t)
	t0 := time.Now()
	out, etext, err := s.call("nvim_status", nil)
	took := time.Since(t0)
	if err != nil || etext != "" {
		t.Fatalf("the first nvim_status after Neovim answers again: %v %s", err, etext)
	}
	t.Logf("first call after Neovim answers again: %v (%s)", took.Round(time.Microsecond), clip(mustJSON(out), 120))
	if state, why := partState(t, s.ok("session_status", nil), "editor"); state != "up" {
		t.Errorf("editor after the restart: %s %s", state, why)
	}
}

// TestPartsHostileEditor: a server that answers with a five-byte length
// bomb sits where Neovim was. The editor's tools are refused (rpcguard),
// the terminal's work.
func TestPartsHostileEditor(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.KillNvim(t)
	os.Remove(in.Dir.Nvim())
	ln, err := net.Listen("unix", in.Dir.Nvim())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	log := &lockedBuffer{}
	go (&nvimtest.Hostile{Mode: nvimtest.HostileHuge, Log: log}).Serve(ln)

	s := connect(t, in, "observe")
	if !strings.Contains(mustJSON(s.ok("pane_list", nil)), shell) {
		t.Fatal("pane_list over a hostile editor lacks the shell pane")
	}
	s.ok("pane_capture", map[string]any{"pane": shell})
	msg := s.refused("nvim_status", nil)
	t.Logf("nvim_status over the hostile editor: %s", msg)
	if !strings.Contains(msg, "is refused") || !strings.Contains(msg, "array of 4294967295 elements") || !strings.Contains(msg, "--force") {
		t.Errorf("nvim_status over the hostile editor: %s", msg)
	}
	noSocketPath(t, in, "nvim_status", msg)
	if state, why := partState(t, s.ok("session_status", nil), "editor"); state != "refused" || !strings.Contains(why, "4294967295") {
		t.Errorf("editor over the hostile server: %s %s", state, why)
	}
	// Control: the server was reached (the refusal is its answer's).
	if !strings.Contains(log.String(), "method nvim_get_api_info") {
		t.Fatalf("the hostile server was never asked: %s", log.String())
	}
}

// TestPartsNoDebugger: the editor's tools work while no debugger runs,
// and the debugger's say it is not running and how to start it.
func TestPartsNoDebugger(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "assist")
	s.ok("nvim_status", nil)
	s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c"})
	msg := s.refusedWith(errcode.PartDown, "gdb_frame", map[string]any{"frame": 0})
	if !strings.Contains(msg, "the debugger is not running in instance "+in.Name) || !strings.Contains(msg, "stemctl debug "+in.Name) {
		t.Errorf("gdb_frame with no debugger: %s", msg)
	}
	noSocketPath(t, in, "gdb_frame", msg)
	gs := s.ok("gdb_status", nil)
	if str(gs["state"]) != "no-debugger" || !strings.Contains(str(gs["message"]), "stemctl debug") {
		t.Errorf("gdb_status with no debugger: %v", gs)
	}
	noSocketPath(t, in, "gdb_status", str(gs["message"]))
	status := s.ok("session_status", nil)
	for part, want := range map[string]string{"tmux": "up", "editor": "up", "debugger": "down"} {
		if state, why := partState(t, status, part); state != want {
			t.Errorf("%s: %s %s, want %s", part, state, why, want)
		}
	}
}

// TestPartsIdentityStillChecked: with the editor gone the instance's
// identity is still verified for every call: a removed container refuses
// the terminal tools that work while it is there.
func TestPartsIdentityStillChecked(t *testing.T) {
	in := fixture(t)
	in.KillNvim(t)
	s := connect(t, in, "observe")
	s.ok("pane_list", nil)
	in.RemoveContainer()
	msg, code, after := refusedCodeWithin(t, s, 10*time.Second, "pane_list", nil)
	t.Logf("container removed with the editor gone: refused after %v: %s", after.Round(time.Millisecond), msg)
	if code != errcode.InstanceDown || !strings.Contains(msg, "container") || !strings.Contains(msg, "stemctl up") {
		t.Errorf("pane_list after the container was removed: code %s: %s", code, msg)
	}
}

// TestPartsEditorReconnect: after Neovim is restarted, an agent's next
// editor call reaches it (no reconnect step, no retry). The time of that
// call, from the moment the new Neovim answers, is logged for
// docs/benchmarks.md; it has no limit here.
func TestPartsEditorReconnect(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe")
	s.ok("nvim_status", nil)
	var took []time.Duration
	for range 10 {
		in.KillNvim(t)
		if msg := s.refused("nvim_status", nil); !strings.Contains(msg, "Neovim is not running") {
			t.Fatalf("nvim_status with Neovim killed: %s", msg)
		}
		in.StartNvim(t) // returns once the new Neovim answers
		t0 := time.Now()
		s.ok("nvim_status", nil)
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	t.Logf("first editor call after a restart, %d restarts: median %v, max %v", len(took), took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))
}

// TestPartsDebuggerWithoutEditor: with the editor gone the debugger's
// tools drive the student's gdb.
func TestPartsDebuggerWithoutEditor(t *testing.T) {
	testenv.Require(t, "gdb")
	in := fixture(t)
	makeTask(t, in)
	in.KillNvim(t)
	s := connect(t, in, "assist")
	startBridge(t, in, "./hello")
	waitUntil(t, 10*time.Second, "gdb_status to see the debugger", func() bool {
		return str(get(s.ok("gdb_status", nil), "status", "state")) == "not-started"
	})
	if br := s.ok("gdb_break", map[string]any{"location": "count_words"}); !strings.Contains(mustJSON(br["result"]), `"func":"count_words"`) {
		t.Fatalf("gdb_break with the editor gone: %v", br)
	}
	status := s.ok("session_status", nil)
	for part, want := range map[string]string{"tmux": "up", "editor": "down", "debugger": "up"} {
		if state, why := partState(t, status, part); state != want {
			t.Errorf("%s: %s %s, want %s", part, state, why, want)
		}
	}
}

// TestPartsHungEditor: a Neovim that stopped answering (held in a ptrace
// stop here: tmux continues a pane stopped by a signal; a busy or hung
// editor looks the same) costs the editor's tools their timeout and a
// message saying so; the terminal's answer meanwhile, and the editor's
// work again when it answers.
func TestPartsHungEditor(t *testing.T) {
	needs.Root(t, "holds Neovim with ptrace")
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	s := connect(t, in, "observe")
	s.ok("nvim_status", nil)
	pid, err := strconv.Atoi(strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:edit", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	release := holdProcess(t, pid)
	t.Cleanup(release)

	s.ok("pane_capture", map[string]any{"pane": shell})
	msg := s.refusedWith(errcode.PartDown, "nvim_status", nil)
	if !strings.Contains(msg, "does not answer") || !strings.Contains(msg, "stemctl up native-amd64 demo hello 1") {
		t.Errorf("nvim_status with Neovim held: %s", msg)
	}
	noSocketPath(t, in, "nvim_status", msg)
	s.ok("pane_list", nil)
	release()
	s.ok("nvim_status", nil)
}

// holdProcess stops pid in a ptrace stop until the returned func is
// called (once or more). ptrace wants one OS thread for all of it.
func holdProcess(t testing.TB, pid int) (release func()) {
	t.Helper()
	held, done := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		if err := syscall.PtraceAttach(pid); err != nil {
			held <- err
			return
		}
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
		held <- err
		<-done
		syscall.PtraceDetach(pid)
	}()
	if err := <-held; err != nil {
		t.Fatalf("hold pid %d: %v", pid, err)
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// TestPartsEditorSocketReplaced: a link where Neovim's socket was, to a
// socket the container must not reach through stem (a canary listening
// on the host), is refused as a replaced socket and never followed; the
// terminal's tools work. Control: the canary accepts a direct dial.
func TestPartsEditorSocketReplaced(t *testing.T) {
	in := fixture(t)
	in.KillNvim(t)
	canary := filepath.Join(t.TempDir(), "canary.sock")
	ln, err := net.Listen("unix", canary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	os.Remove(in.Dir.Nvim())
	if err := os.Symlink(canary, in.Dir.Nvim()); err != nil {
		t.Fatal(err)
	}

	s := connect(t, in, "observe")
	s.ok("pane_list", nil)
	msg := s.refusedWith(errcode.PartDown, "nvim_status", nil)
	if !strings.Contains(msg, "is not a socket (something inside the container replaced it)") || !strings.Contains(msg, "stemctl status") {
		t.Errorf("nvim_status over a replaced socket: %s", msg)
	}
	noSocketPath(t, in, "nvim_status", msg)
	if state, _ := partState(t, s.ok("session_status", nil), "editor"); state != "refused" {
		t.Errorf("editor over a replaced socket: %s", state)
	}
	select {
	case <-accepted:
		t.Fatal("stem followed the link to the canary socket")
	default:
	}
	c, err := net.Dial("unix", canary)
	if err != nil {
		t.Fatalf("control: the canary does not accept: %v", err)
	}
	c.Close()
	<-accepted
}
