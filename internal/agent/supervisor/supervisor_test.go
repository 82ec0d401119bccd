package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// pane is a terminal standing in for a tmux pane: the relay gets the tty,
// the test types into and reads from the master.
type pane struct {
	t      *testing.T
	master *os.File
	tty    *os.File
	mu     sync.Mutex
	out    bytes.Buffer
}

func newPane(t *testing.T, rows, cols int) *pane {
	t.Helper()
	m, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	pty.Setsize(m, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	p := &pane{t: t, master: m, tty: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { m.Close(); tty.Close() })
	return p
}

func (p *pane) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *pane) waitFor(want string, d time.Duration) {
	p.t.Helper()
	if !p.shows(want, d) {
		p.t.Fatalf("the pane never showed %q; it shows:\n%s", want, p.text())
	}
}

// shows reports whether the pane shows want within d.
func (p *pane) shows(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if strings.Contains(p.text(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *pane) typeText(s string) {
	p.t.Helper()
	if _, err := p.master.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

type supervised struct {
	ready *bytes.Buffer
	done  chan error
	sock  string
	dir   string
}

type syncBuf struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// String is locked too: the supervisor's connection goroutines may still
// log while the test reads.
func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

func startSupervisor(t *testing.T, ctx context.Context, spec runspec.Spec) (*supervised, *syncBuf) {
	t.Helper()
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("/tmp", "sa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	spec.Socket = filepath.Join(sockDir, "a-"+spec.ID+".sock")
	data, _ := json.Marshal(spec)
	os.WriteFile(filepath.Join(dir, runspec.File), data, 0o600)
	pr, pw, _ := os.Pipe()
	logs := &syncBuf{}
	s := &supervised{done: make(chan error, 1), sock: spec.Socket, dir: dir}
	go func() { s.done <- Supervise(ctx, dir, pw, logs, nil) }()
	lines := runspec.ReadLines(pr)
	if _, err := runspec.Expect(ctx, lines, runspec.ReadyListening, 5*time.Second, "test"); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	return s, logs
}

// The host side and the relay, end to end on real pseudo terminals: the
// agent starts at the window's size with its TERM, keys and size changes
// reach it, its output reaches the window, and its exit status is shown.
func TestSupervisorAndRelay(t *testing.T) {
	needs.Program(t, "stty", "coreutils")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Setenv("TMUX", "/tmp/tmux-0/default,1,0") // stemctl run from the host's tmux
	t.Setenv("COLUMNS", "7")
	script := `printf 'TERM=%s STEM_X=%s TMUX=%s COLUMNS=%s\n' "$TERM" "$STEM_X" "${TMUX-unset}" "${COLUMNS-unset}"; stty size
while IFS= read -r line; do case "$line" in size) stty size;; quit) exit 7;; *) echo "got:$line";; esac; done`
	s, logs := startSupervisor(t, ctx, runspec.Spec{ID: "a1b2c3", Provider: "test", Instance: "inst",
		Argv: []string{"bash", "--norc", "--noprofile", "-c", script}, Env: map[string]string{"STEM_X": "1"}, WorkDir: t.TempDir()})
	p := newPane(t, 30, 100)
	relayDone := make(chan error, 1)
	relayCode := make(chan int, 1)
	go func() {
		code, err := ptyproto.Relay(ctx, ptyproto.RelayOptions{Socket: s.sock, In: p.tty, Out: p.tty,
			Getenv: func(k string) string { return map[string]string{"TERM": "xterm-256color"}[k] }})
		relayCode <- code
		relayDone <- err
	}()
	p.waitFor("TERM=xterm-256color STEM_X=1 TMUX=unset COLUMNS=unset", 10*time.Second)
	p.waitFor("30 100", 5*time.Second)
	p.typeText("hello world\r")
	p.waitFor("got:hello world", 5*time.Second)

	// A new window size reaches the agent.
	pty.Setsize(p.tty, &pty.Winsize{Rows: 40, Cols: 120})
	syscall.Kill(os.Getpid(), syscall.SIGWINCH) // the tty is not our controlling terminal
	// The size travels relay -> supervisor -> the agent's pty; ask until
	// the agent sees it (a single ask after a fixed pause could come first
	// under load and show the old size).
	for deadline := time.Now().Add(10 * time.Second); ; {
		p.typeText("size\r")
		if p.shows("40 120", 200*time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never saw the new size 40 120; the pane shows:\n%s", p.text())
		}
	}

	p.typeText("quit\r")
	p.waitFor("[stem] test exited with status 7", 5*time.Second)
	p.waitFor("Press any key", 2*time.Second)
	p.typeText("x")
	select {
	case err := <-relayDone:
		if err != nil {
			t.Fatal(err)
		}
		if code := <-relayCode; code != 7 {
			t.Fatalf("relay returned %d, want the agent's 7", code)
		}
	case <-ctx.Done():
		t.Fatal("the relay did not end after a key")
	}
	if err := <-s.done; err != nil {
		t.Fatalf("supervisor: %v\n%s", err, logs.String())
	}
	if _, err := os.Lstat(s.sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is left behind: %v", err)
	}
}

// Closing the agent's window is closing its terminal: after the grace
// period the agent gets SIGHUP.
func TestClosedWindowHangsUpTheAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark := filepath.Join(t.TempDir(), "hup")
	script := fmt.Sprintf(`trap 'echo HUP > %s; exit 0' HUP; echo up; while :; do sleep 0.05; done`, mark)
	s, logs := startSupervisor(t, ctx, runspec.Spec{ID: "d4e5f6", Provider: "test", Argv: []string{"bash", "--norc", "-c", script}, Grace: 200 * time.Millisecond})
	// The student's tmux lives on: only the window was closed.
	tl, err := net.Listen("unix", filepath.Join(filepath.Dir(s.sock), sockets.TmuxSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	p := newPane(t, 24, 80)
	rctx, rcancel := context.WithCancel(ctx)
	go ptyproto.Relay(rctx, ptyproto.RelayOptions{Socket: s.sock, In: p.tty, Out: p.tty, NoWait: true})
	p.waitFor("up", 10*time.Second)
	rcancel() // the pane goes away
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("the agent outlived its window\n%s", logs.String())
	}
	if data, _ := os.ReadFile(mark); string(data) != "HUP\n" {
		t.Fatalf("the agent did not get SIGHUP (mark %q)\n%s", data, logs.String())
	}
	if !strings.Contains(logs.String(), "its window was closed") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// A window lost with the whole tmux server (the container stopped: its
// t.sock is left refusing connections) ends the agent at once, without the
// grace a closed window gets, and says why in its state file.
func TestGoneTmuxEndsTheAgentAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, logs := startSupervisor(t, ctx, runspec.Spec{ID: "a0b1c2", Provider: "test",
		Argv: []string{"bash", "--norc", "-c", `echo up; while :; do sleep 0.05; done`}, Grace: time.Minute})
	tl, err := net.Listen("unix", filepath.Join(filepath.Dir(s.sock), sockets.TmuxSocket))
	if err != nil {
		t.Fatal(err)
	}
	tl.(*net.UnixListener).SetUnlinkOnClose(false)
	p := newPane(t, 24, 80)
	rctx, rcancel := context.WithCancel(ctx)
	go ptyproto.Relay(rctx, ptyproto.RelayOptions{Socket: s.sock, In: p.tty, Out: p.tty, NoWait: true})
	p.waitFor("up", 10*time.Second)
	// The pane shows the agent's output before the supervisor has written
	// the window into its state file: wait for that, not for the pane.
	if st := waitStateFile(t, s.dir, 10*time.Second, func(st agentstore.State) bool { return st.Windows == 1 }); st.Stopping != "" {
		t.Fatalf("state with the window open: %+v", st)
	}
	tl.Close() // the server dies, its socket stays
	rcancel()  // and so does the window
	t0 := time.Now()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent outlived its tmux server\n%s", logs.String())
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("the agent ended %s after its tmux server", d)
	}
	if st := readStateFile(t, s.dir); !strings.Contains(st.Stopping, "tmux server is gone") || st.Windows != 0 {
		t.Fatalf("state after: %+v\n%s", st, logs.String())
	}
}

// waitStateFile waits until the supervisor's state file satisfies ok and
// returns it.
func waitStateFile(t *testing.T, dir string, d time.Duration, ok func(agentstore.State) bool) agentstore.State {
	t.Helper()
	var st agentstore.State
	var err error
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		var data []byte
		if data, err = os.ReadFile(filepath.Join(dir, agentstore.StateFile)); err == nil {
			st = agentstore.State{}
			if err = json.Unmarshal(data, &st); err == nil && ok(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state file did not get there within %s: %+v (%v)", d, st, err)
		}
	}
}

func readStateFile(t *testing.T, dir string) agentstore.State {
	t.Helper()
	var st agentstore.State
	data, err := os.ReadFile(filepath.Join(dir, agentstore.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A removed socket directory (container removed or re-created) ends the
// agent; an agent that ignores SIGHUP and SIGTERM is killed.
func TestSocketGoneStopsAStubbornAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, logs := startSupervisor(t, ctx, runspec.Spec{ID: "0f0f0f", Provider: "test",
		Argv: []string{"bash", "--norc", "-c", `trap '' HUP TERM; echo up; while :; do sleep 0.05; done`}})
	p := newPane(t, 24, 80)
	go ptyproto.Relay(ctx, ptyproto.RelayOptions{Socket: s.sock, In: p.tty, Out: p.tty, NoWait: true})
	p.waitFor("up", 10*time.Second)
	os.RemoveAll(filepath.Dir(s.sock))
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the agent outlived its socket\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "socket directory went away") || !strings.Contains(logs.String(), `signal "SIGKILL"`) {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// A relay that never comes is reported on the readiness pipe.
func TestNoWindowIsReported(t *testing.T) {
	dir := t.TempDir()
	sockDir, _ := os.MkdirTemp("/tmp", "sa")
	defer os.RemoveAll(sockDir)
	spec := runspec.Spec{ID: "abcdef", Argv: []string{"true"}, Socket: filepath.Join(sockDir, "a.sock"), RelayTimeout: 200 * time.Millisecond}
	data, _ := json.Marshal(spec)
	os.WriteFile(filepath.Join(dir, runspec.File), data, 0o600)
	pr, pw, _ := os.Pipe()
	err := Supervise(context.Background(), dir, pw, io.Discard, nil)
	out, _ := io.ReadAll(pr)
	if err == nil || !strings.Contains(string(out), "listening\nerror the agent's tmux window did not connect within 200ms") {
		t.Fatalf("err %v, pipe %q", err, out)
	}
}

// A relay speaking another protocol version is told so.
func TestRelayVersionMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _ := startSupervisor(t, ctx, runspec.Spec{ID: "aaaaaa", Argv: []string{"true"}, RelayTimeout: 2 * time.Second})
	c, err := dialUnix(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ptyproto.WriteJSON(c, ptyproto.Hello, ptyproto.HelloMsg{Version: 99})
	typ, p, err := ptyproto.ReadFrame(c)
	if err != nil || typ != ptyproto.Hello || !strings.Contains(string(p), "rebuild stemctl and stem-mcp together") {
		t.Fatalf("%q %s %v", typ, p, err)
	}
	<-s.done
}

func dialUnix(p string) (io.ReadWriteCloser, error) {
	return net.Dial("unix", p)
}
