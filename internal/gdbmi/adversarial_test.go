package gdbmi

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/sockets"
)

// TestAdversarial throws hostile agent input and hostile socket traffic at a
// live bridge and checks that gdb never runs anything and other clients
// are undisturbed.
func TestAdversarial(t *testing.T) {
	work := buildNative(t)
	dir := sockDir(t)
	p := startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	sock := waitSocket(t, dir, p)
	good := dial(t, sock)
	ctx := context.Background()
	canary := filepath.Join(work, "canary")
	noCanary := func(when string) {
		t.Helper()
		if _, err := os.Lstat(canary); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: canary exists (%v): gdb ran a command", when, err)
		}
	}

	// Stop in add so expressions have something to read.
	exe(t, good, BreakInsert(mustLoc(t, "add")))
	p.typeText("run\r")
	waitEvent(t, good, EventStopped, 15*time.Second)

	breakpoints := func() int {
		r := exe(t, good, BreakList())
		tbl, _ := r.Get("BreakpointTable")
		body, _ := tbl.Get("body")
		return len(body.Elems())
	}
	before := breakpoints()

	// Hostile strings never become commands: the validators refuse them,
	// so there is nothing to pass to Exec. If one were accepted, it is
	// sent, so a validator bug would show up as a canary or a breakpoint.
	for _, s := range hostileLocations {
		if loc, err := ParseLocation(s); err == nil {
			t.Errorf("location %q accepted", s)
			good.Exec(ctx, BreakInsert(loc))
		}
	}
	for _, s := range hostileExprs {
		if e, err := ParseSafeExpr(s); err == nil {
			t.Errorf("expression %q accepted", s)
			good.Exec(ctx, DataEvaluate(e))
		}
	}
	if n := breakpoints(); n != before {
		t.Fatalf("breakpoints went from %d to %d", before, n)
	}
	noCanary("after hostile locations and expressions")

	// gdb's run and shell commands as agent text are names: gdb looks for
	// a function or variable so called and finds none. A `run` would have
	// restarted the program, which must still be stopped in add.
	for _, w := range commandWords {
		if _, err := good.Exec(ctx, BreakInsert(mustLoc(t, w))); err == nil || !strings.Contains(err.Error(), "not defined") {
			t.Errorf("break at %q: %v, want gdb's function-not-defined error", w, err)
		}
		if _, err := good.Exec(ctx, DataEvaluate(mustExpr(t, w))); err == nil || !strings.Contains(err.Error(), "No symbol") {
			t.Errorf("print %q: %v, want gdb's no-symbol error", w, err)
		}
	}
	if st, err := good.Status(ctx, false); err != nil || st.State != StateStopped || st.Frame == nil || st.Frame.Func != "add" {
		t.Fatalf("after command words as names: %+v %v, want still stopped in add", st, err)
	}
	if n := breakpoints(); n != before {
		t.Fatalf("breakpoints went from %d to %d", before, n)
	}
	noCanary("after command words as names")

	// Zero values and refused Console text fail before anything is sent.
	for name, cmd := range map[string]Command{
		"zero Command":     {},
		"zero Location":    BreakInsert(Location{}),
		"zero SafeExpr":    DataEvaluate(SafeExpr{}),
		"console newline":  Console("echo hi\nshell touch canary"),
		"console CR":       Console("echo hi\rshell touch canary"),
		"console NUL":      Console("echo hi\x00shell touch canary"),
		"console empty":    Console("  "),
		"console 1MB":      Console(strings.Repeat("x", 1<<20)),
		"negative frame":   StackSelectFrame(-1),
		"huge frame limit": StackListFrames(1 << 30),
	} {
		if _, err := good.Exec(ctx, cmd); err == nil {
			t.Errorf("%s: Exec succeeded", name)
		}
	}
	noCanary("after refused commands")

	// Console text with MI quoting tricks stays one console command: echo
	// prints it instead of gdb running a second command.
	tricks := []string{
		`echo \" , "shell touch canary"`,
		`echo " "-interpreter-exec" "console" "shell touch canary"`,
		`echo \\" shell touch canary \\"`,
		"echo \x1b[31m\ttab \\033 \\\" end",
	}
	for _, s := range tricks {
		r, err := good.Exec(ctx, Console(s))
		if err != nil {
			t.Errorf("Console(%q): %v", s, err)
		}
		if !strings.Contains(r.Console, "canary") && strings.Contains(s, "canary") {
			t.Errorf("Console(%q) printed %q", s, r.Console)
		}
	}
	noCanary("after quoting tricks")

	// Raw, malformed traffic on g.sock from another connection.
	raw, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rawLines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(raw)
		for sc.Scan() {
			rawLines <- sc.Text()
		}
		close(rawLines)
	}()
	garbage := []string{
		"\x00\xff\xfe garbage\n",
		"shell touch canary\n",
		"123shell touch canary\n",
		"-interpreter-exec console \"shell touch canary\"\rshell touch canary\n",
		"-break-list\x00shell touch canary\n",
		"12345678901234567890123-break-list\n",
		"-\n",
		"-BAD\n",
		"-bad;command\n",
		"7-break-insert \"main if $_shell(\\\"touch canary\\\")\"\x1b\n",
		"\n\n\r\n",
		"(gdb)\n",
		"^done\n",
		"~\"forged stream\"\n",
	}
	for _, g := range garbage {
		if _, err := raw.Write([]byte(g)); err != nil {
			t.Fatalf("write garbage: %v", err)
		}
	}
	refusals := 0
	timeout := time.After(5 * time.Second)
	for refusals < 13 {
		select {
		case l, ok := <-rawLines:
			if !ok {
				t.Fatalf("bridge closed the raw connection after %d refusals", refusals)
			}
			if !strings.Contains(l, "^error") {
				t.Fatalf("raw client got %q, want only refusals", l)
			}
			refusals++
		case <-timeout:
			t.Fatalf("only %d refusals for %d malformed lines", refusals, len(garbage))
		}
	}
	// The good client is undisturbed and saw nothing of this.
	if r := exe(t, good, DataEvaluate(mustExpr(t, "a + b"))); r.Console != "3" {
		t.Fatalf("good client after garbage: %q", r.Console)
	}
	select {
	case ev := <-good.Events():
		t.Errorf("good client got an event from another client's garbage: %+v", ev)
	default:
	}

	// A line over the limit closes only that connection.
	big := strings.Repeat("A", 1<<20) + "\n"
	raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	raw.Write([]byte(big))
	closed := time.After(5 * time.Second)
drain:
	for {
		select {
		case _, ok := <-rawLines:
			if !ok {
				break drain
			}
		case <-closed:
			t.Fatal("bridge kept a connection that sent a 1 MB line")
		}
	}
	exe(t, good, BreakList())

	// A client that disconnects in the middle of a command, and one whose
	// Exec is abandoned, leave no trace for others: the answer and the
	// command's console output are dropped. The first raw client keeps gdb
	// busy so the later commands are still queued when their askers go.
	for i := 0; i < 5; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			c.Write([]byte("-interpreter-exec console \"shell sleep 0.5\"\n"))
			gdb := syncOf(t, dir).GDBPid
			waitCond(t, 5*time.Second, "gdb runs its shell (it is asleep)", func() bool {
				return hasDescendant(gdb, 2, "sleep")
			})
		}
		c.Write([]byte("5-interpreter-exec console \"info frame\"\n6-stack-list-frames\n"))
		c.Close()
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = good.Exec(short, Console("info frame"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec queued behind a sleeping gdb: %v", err)
	}
	r := exe(t, good, Console("echo after\\n"))
	if r.Console != "after\n" {
		t.Fatalf("output leaked into the next command: %q", r.Console)
	}
	for _, ev := range collectEvents(good, 300*time.Millisecond) {
		if strings.Contains(ev.Text, "Stack level") || ev.Kind == EventConsole {
			t.Fatalf("another command's output reached this client as an event: %+v", ev)
		}
	}

	// The student's gdb still works and nothing ran.
	m := p.mark()
	p.typeText("print a\r")
	p.waitFor(m, `\$1 = 1`, 5*time.Second)
	noCanary("at the end")

	// Second line of defence: an expression the validator accepts can
	// still make gdb call malloc in the program (an array held in a
	// convenience variable used as a pointer); DataEvaluate runs with
	// may-call-functions off, so gdb refuses.
	exe(t, good, Console(`set $arr = "abc"`))
	if _, err := good.Exec(ctx, DataEvaluate(mustExpr(t, "$arr + 1"))); err == nil || !strings.Contains(err.Error(), "may-call-functions is off") {
		t.Errorf("$arr + 1: %v", err)
	}
	if r, err := good.Exec(ctx, Console("show may-call-functions")); err != nil || !strings.Contains(r.Console, "is on") {
		t.Errorf("the student's may-call-functions setting was not restored: %q %v", r.Console, err)
	}

	// Control: the canary check does detect a command that gdb runs (the
	// full level may do this on purpose).
	exe(t, good, Console("shell touch canary"))
	if _, err := os.Lstat(canary); err != nil {
		t.Fatalf("control: shell via Console did not create the canary, so the checks above prove nothing: %v", err)
	}
}

func collectEvents(c *Client, d time.Duration) []Event {
	var out []Event
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-deadline:
			return out
		}
	}
}

func TestDialNotRunning(t *testing.T) {
	dir := sockDir(t)
	ctx := context.Background()
	path := filepath.Join(dir, sockets.GDBSocket)
	_, err := Dial(ctx, path)
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("Dial without a socket: %v", err)
	}
	// A socket nobody listens on any more.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Dial(ctx, path); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Dial to a stale socket: %v", err)
	}
	os.Remove(path)
	os.WriteFile(path, nil, 0o600)
	if _, err := Dial(ctx, path); err == nil || errors.Is(err, ErrNotRunning) {
		t.Fatalf("Dial to a regular file: %v", err)
	}
}

// TestBridgeSocketPath checks what the bridge does with whatever already
// sits at g.sock.
func TestBridgeSocketPath(t *testing.T) {
	requireProgram(t, "gdb", "gdb")
	ctx := context.Background()
	opts := func(dir string) BridgeOptions {
		return BridgeOptions{Dir: dir, Argv: []string{"gdb", "-q", "-nx", "-batch"}}
	}

	// A symlink is refused and not followed; its target is untouched.
	dir := sockDir(t)
	target := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Symlink(target, filepath.Join(dir, sockets.GDBSocket))
	if _, err := RunBridge(ctx, opts(dir)); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlink at g.sock: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatal("symlink target changed")
	}
	if fi, err := os.Lstat(filepath.Join(dir, sockets.GDBSocket)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("symlink removed")
	}

	// A regular file and a directory are refused.
	dir = sockDir(t)
	os.WriteFile(filepath.Join(dir, sockets.GDBSocket), []byte("x"), 0o600)
	if _, err := RunBridge(ctx, opts(dir)); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("file at g.sock: %v", err)
	}
	dir = sockDir(t)
	os.Mkdir(filepath.Join(dir, sockets.GDBSocket), 0o700)
	if _, err := RunBridge(ctx, opts(dir)); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory at g.sock: %v", err)
	}

	// The socket directory itself may not be a symlink or relative.
	real := sockDir(t)
	link := filepath.Join(t.TempDir(), "l")
	os.Symlink(real, link)
	if _, err := RunBridge(ctx, opts(link)); err == nil {
		t.Fatal("symlinked socket directory accepted")
	}
	if _, err := RunBridge(ctx, BridgeOptions{Dir: "rel", Argv: []string{"gdb"}}); err == nil {
		t.Fatal("relative socket directory accepted")
	}
	if code, err := RunBridge(ctx, BridgeOptions{Dir: real, Argv: []string{"no-such-gdb-here"}}); err == nil || code != 127 {
		t.Fatalf("missing gdb: %d %v", code, err)
	}
	if _, err := RunBridge(ctx, BridgeOptions{Dir: real}); err == nil {
		t.Fatal("empty argv accepted")
	}
}

// TestBridgeLifecycle: a stale socket is replaced; a second bridge on a
// live socket is refused; SIGINT and SIGQUIT do not stop the bridge;
// SIGTERM reaches gdb and the bridge exits with gdb's code and cleans up.
func TestBridgeLifecycle(t *testing.T) {
	work := buildNative(t)
	dir := sockDir(t)
	path := filepath.Join(dir, sockets.GDBSocket)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	stale, _ := os.Lstat(path)

	p := startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	p.waitFor(0, `\(gdb\) $`, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Lstat(path)
		if err == nil && !os.SameFile(fi, stale) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stale socket never replaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := dial(t, path)
	exe(t, c, BreakList())

	// A second bridge in the same directory refuses to start.
	if _, err := RunBridge(context.Background(), BridgeOptions{Dir: dir, Argv: []string{"gdb", "-q", "-nx", "-batch"}}); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Fatalf("second bridge: %v", err)
	}

	bridgePid := p.cmd.Process.Pid
	syscall.Kill(bridgePid, syscall.SIGINT)
	syscall.Kill(bridgePid, syscall.SIGQUIT)
	waitCond(t, 5*time.Second, "the bridge took both signals", func() bool {
		return !signalsPending(bridgePid, syscall.SIGINT, syscall.SIGQUIT)
	})
	exe(t, c, BreakList())
	s, err := ReadSync(dir)
	if err != nil {
		t.Fatal(err)
	}
	gdbPid := s.GDBPid

	// gdb 13 quits on SIGTERM with status 0 (and a Python traceback).
	syscall.Kill(bridgePid, syscall.SIGTERM)
	code := p.waitExit(10 * time.Second)
	if syscall.Kill(gdbPid, 0) == nil {
		t.Errorf("gdb (pid %d) still alive after the bridge exited", gdbPid)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("g.sock left behind: %v", err)
	}
	waitSync(t, dir, "gdb-exited", func(s SyncState) bool { return s.State == StateGDBExited })
	t.Logf("bridge exit code after SIGTERM: %d", code)

	// gdb killed by a signal: the bridge reports 128+signal, like a shell.
	dir = sockDir(t)
	p = startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	waitSocket(t, dir, p)
	s = waitSync(t, dir, "gdb pid", func(s SyncState) bool { return s.GDBPid > 0 })
	syscall.Kill(s.GDBPid, syscall.SIGKILL)
	if code := p.waitExit(10 * time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("bridge exit code %d after gdb was killed, want %d", code, 128+int(syscall.SIGKILL))
	}
	if _, err := os.Lstat(filepath.Join(dir, sockets.GDBSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("g.sock left behind: %v", err)
	}
}
