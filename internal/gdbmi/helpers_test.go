package gdbmi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// The test binary doubles as the bridge process: with helperEnv set it runs
// RunBridge on its own stdio, which the tests connect to a pty standing in
// for the tmux pane (session leader, controlling terminal), as in the
// container.
const helperEnv = "STEM_GDBMI_BRIDGE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(bridgeHelperMain())
	}
	os.Exit(m.Run())
}

func bridgeHelperMain() int {
	i := 0
	for i < len(os.Args) && os.Args[i] != "--" {
		i++
	}
	if i >= len(os.Args)-1 {
		fmt.Fprintln(os.Stderr, "bridge helper: no command after --")
		return 2
	}
	var logw io.Writer
	if p := os.Getenv("STEM_GDBMI_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			defer f.Close()
			logw = f
		}
	}
	code, err := RunBridge(context.Background(), BridgeOptions{
		Dir: os.Getenv("STEM_GDBMI_DIR"), Argv: os.Args[i+1:],
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Log: logw,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
	}
	return code
}

// requireProgram skips under -short and otherwise fails (not skips) when
// a program the tests drive is missing, naming the Debian package that
// provides it.
func requireProgram(t testing.TB, name, pkg string) string {
	t.Helper()
	return needs.Program(t, name, pkg)
}

func run(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// sockDir makes a private socket directory short enough for AF_UNIX.
func sockDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gmi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// pane is the student's terminal: a pty whose other side runs the bridge.
type pane struct {
	t       testing.TB
	cmd     *exec.Cmd
	pty     *os.File
	dir     string
	logPath string

	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}

	exited   chan struct{}
	exitCode int
}

func startPane(t testing.TB, dir, workdir string, argv ...string) *pane {
	t.Helper()
	p := &pane{t: t, dir: dir, logPath: filepath.Join(t.TempDir(), "bridge.log"), changed: make(chan struct{}, 1), exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], append([]string{"--"}, argv...)...)
	p.cmd.Env = append(os.Environ(), helperEnv+"=1", "STEM_GDBMI_DIR="+dir, "STEM_GDBMI_LOG="+p.logPath, "TERM=xterm")
	p.cmd.Dir = workdir
	f, err := pty.StartWithSize(p.cmd, &pty.Winsize{Rows: 60, Cols: 200})
	if err != nil {
		t.Fatalf("start bridge under a pty: %v", err)
	}
	p.pty = f
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			if n > 0 {
				p.mu.Lock()
				p.buf.Write(b[:n])
				p.mu.Unlock()
				select {
				case p.changed <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			// The bridge leads its own session and process group; gdb is in
			// that group too.
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
		f.Close()
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				t.Logf("bridge log:\n%s", b)
			}
			t.Logf("pane:\n%s", p.text(0))
		}
	})
	return p
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\r`)

// text is what the student has seen since mark, without terminal escapes.
func (p *pane) text(mark int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buf.Bytes()
	if mark > len(b) {
		mark = len(b)
	}
	return ansiRE.ReplaceAllString(string(b[mark:]), "")
}

func (p *pane) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Len()
}

func (p *pane) typeText(s string) {
	p.t.Helper()
	if _, err := p.pty.WriteString(s); err != nil {
		p.t.Fatalf("type into pane: %v", err)
	}
}

// patient stretches a wait's bound: the bounds the tests name are what a
// quiet machine needs, and a loaded CI runner (the whole suite on two
// cores) has missed a 5 s one. A bound only limits how long a failing test
// hangs; nothing waits for it to pass.
func patient(d time.Duration) time.Duration { return 6 * d }

// waitFor waits until the pane shows a match for re after mark and returns
// the time it was first seen.
func (p *pane) waitFor(mark int, re string, timeout time.Duration) time.Time {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(patient(timeout))
	for {
		if rx.MatchString(p.text(mark)) {
			return time.Now()
		}
		select {
		case <-p.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			p.t.Fatalf("pane never showed %q; it shows:\n%s", re, p.text(mark))
		}
	}
}

func (p *pane) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.exitCode
	case <-time.After(timeout):
		p.t.Fatalf("bridge did not exit within %v", timeout)
	}
	return -1
}

func waitSocket(t testing.TB, dir string, p *pane) string {
	t.Helper()
	path := filepath.Join(dir, sockets.GDBSocket)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return path
		}
		select {
		case <-p.exited:
			t.Fatalf("bridge exited with %d before serving; pane:\n%s", p.exitCode, p.text(0))
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no %s after 30s", path)
	return ""
}

func dial(t testing.TB, path string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func exe(t testing.TB, c *Client, cmd Command) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// waitEvent returns the next event of the given kind, skipping others.
func waitEvent(t testing.TB, c *Client, kind EventKind, timeout time.Duration) Event {
	t.Helper()
	timeout = patient(timeout)
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("event stream closed waiting for %s (saw %v)", kind, seen)
			}
			if ev.Kind == kind {
				return ev
			}
			seen = append(seen, string(ev.Kind)+"/"+ev.Class)
		case <-deadline:
			t.Fatalf("no %s event within %v (saw %v)", kind, timeout, seen)
		}
	}
}

// drainEvents discards queued events.
func drainEvents(c *Client) {
	for {
		select {
		case <-c.Events():
		default:
			return
		}
	}
}

func mustLoc(t testing.TB, s string) Location {
	t.Helper()
	l, err := ParseLocation(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustExpr(t testing.TB, s string) SafeExpr {
	t.Helper()
	e, err := ParseSafeExpr(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// waitSync polls gdb-sync.json until ok accepts it.
func waitSync(t testing.TB, dir string, what string, ok func(SyncState) bool) SyncState {
	t.Helper()
	deadline := time.Now().Add(patient(5 * time.Second))
	var last SyncState
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = ReadSync(dir)
		if lastErr == nil && ok(last) {
			return last
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("gdb-sync.json never showed %s; last %+v (frame %+v) err %v", what, last, last.Frame, lastErr)
	return last
}

func checkStop(t testing.TB, who string, ev Event, reason, fn string, line int) {
	t.Helper()
	if ev.Reason != reason || ev.Frame == nil || ev.Frame.Func != fn || (line > 0 && ev.Frame.Line != line) {
		t.Fatalf("%s: stop = reason %q frame %+v; want %s in %s at line %d", who, ev.Reason, ev.Frame, reason, fn, line)
	}
}

// waitCond waits until cond holds.
func waitCond(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// syncOf reads gdb-sync.json.
func syncOf(t testing.TB, dir string) SyncState {
	t.Helper()
	s, err := ReadSync(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signalsPending reports whether any of sigs is pending for process pid
// (for the process or one of its threads), from /proc.
func signalsPending(pid int, sigs ...syscall.Signal) bool {
	var mask uint64
	for _, s := range sigs {
		mask |= 1 << (uint(s) - 1)
	}
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || (k != "SigPnd" && k != "ShdPnd") {
				continue
			}
			if bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && bits&mask != 0 {
				return true
			}
		}
	}
	return false
}

// hasDescendant reports whether a child of pid (or theirs, down to depth
// levels) has word in its command line.
func hasDescendant(pid, depth int, word string) bool {
	if depth == 0 {
		return false
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		kid, _ := strconv.Atoi(k)
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kid))
		if strings.Contains(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})), word) || hasDescendant(kid, depth-1, word) {
			return true
		}
	}
	return false
}
