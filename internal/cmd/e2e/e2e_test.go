// Package e2e runs the stemctl binary the way a user does, against real
// Podman, tmux and Neovim, in a private account (runtime, state, config
// directories and workspace under temp dirs).
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/demotask"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		os.Exit(goClientHelper(sock))
	}
	if state := os.Getenv(askEnv); state != "" {
		os.Exit(askHelper(state, os.Args[1:]))
	}
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// bins builds stemctl and stem-mcp once per test process.
func bins(t *testing.T) string {
	t.Helper()
	testenv.RequireAccount(t) // before the builds, which -short would waste
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	return testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
}

// account is a private student account (testenv.Account).
type account struct {
	*testenv.Account
	t *testing.T
}

func newAccount(t *testing.T) *account {
	t.Helper()
	return &account{Account: testenv.NewAccount(t, bins(t), testenv.AccountOptions{Env: []string{"TERM=xterm"}}), t: t}
}

type result = testenv.Result

func (a *account) run(args ...string) (result, error) { return a.Run(nil, args...) }

// must runs stemctl and requires the exit code.
func (a *account) must(code int, args ...string) result {
	a.t.Helper()
	r, err := a.run(args...)
	if err != nil {
		a.t.Fatalf("stemctl %v: %v", args, err)
	}
	if r.Code != code {
		a.t.Fatalf("stemctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.Code, code, r.Stdout, r.Stderr)
	}
	return r
}

func TestBadNamesExplainAndChangeNothing(t *testing.T) {
	a := newAccount(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"up", "native-amd64", "demo", "helo", "1"}, []string{`unknown card "helo"`, `did you mean "hello"`}},
		{[]string{"up", "native-amd64", "dmo", "hello", "1"}, []string{`unknown series "dmo"`, "demo", "inf"}},
		{[]string{"up", "native-amd64", "demo", "hello", "9"}, []string{`unknown task "9"`, "1, 2, 3"}},
		{[]string{"up", "native-amd6", "demo", "hello", "1"}, []string{`unknown profile "native-amd6"`, "hazard3-sim"}},
		{[]string{"up", "native-amd64", "inf", "bss", "4"}, []string{"runs on hazard3-sim or rp2350, not on native-amd64"}},
		{[]string{"up", "rp2350", "demo", "hello", "3", "--target", "rp2040"}, []string{`unknown target "rp2040"`, "rp2350-arm"}},
		{[]string{"up", "native-amd64", "demo", "hello", "1", "--device", "/dev/null"}, []string{"takes no devices"}},
		{[]string{"status", "nope"}, []string{"no such instance", "stemctl up"}},
		{[]string{"up", "native-amd64", "demo"}, []string{"takes 4 argument(s)", "PROFILE SERIES CARD TASK"}},
	} {
		r, err := a.run(c.args...)
		if err != nil || r.Code == 0 {
			t.Fatalf("%v: exit %d %v", c.args, r.Code, err)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, r.Stderr)
			}
		}
	}
	r := a.must(0, "list", "--json")
	if strings.TrimSpace(r.Stdout) != "[]" {
		t.Fatalf("bad input created instances: %s", r.Stdout)
	}
}

func TestLifecycleThroughTheCLI(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	r := a.must(0, "up", "native-amd64", "demo", "hello", "1", "--json")
	var up struct {
		Action string
		Record struct {
			Instance    string
			ContainerID string `json:"container_id"`
			SocketDir   string `json:"socket_dir"`
			CardPath    string `json:"card_path"`
		}
	}
	if err := json.Unmarshal([]byte(r.Stdout), &up); err != nil || up.Action != "created" {
		t.Fatalf("up --json: %v %s", err, r.Stdout)
	}
	a.must(0, "status", inst)
	r = a.must(0, "list", "--json")
	if !strings.Contains(r.Stdout, `"state": "running"`) {
		t.Fatalf("list: %s", r.Stdout)
	}
	// Task verbs: the manifest's commands, inside, exit codes passed on.
	a.must(0, "build", inst)
	// The demo's first task starts with failing tests (make's status 2
	// passed on) and passes once the student has fixed the bug.
	r = a.must(2, "test", inst)
	if !strings.Contains(r.Stdout, demotask.FailingCheck) || !strings.Contains(r.Stdout, demotask.Failed) {
		t.Fatalf("test before the fix does not name the failing check:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	if err := demotask.Fix(filepath.Join(up.Record.CardPath, "t1")); err != nil {
		t.Fatal(err)
	}
	r = a.must(0, "test", inst)
	if !strings.Contains(r.Stdout, demotask.Passed) || strings.Contains(r.Stdout, "FAIL") {
		t.Fatalf("test after the fix:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	r = a.must(0, "run", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stdout, "Hello, stem!") || !strings.Contains(r.Stdout, `"the quick brown fox" has 4 words`) {
		t.Fatalf("run did not show the program's output: %q", r.Stdout)
	}
	r = a.must(0, "build", inst, "--print")
	if strings.TrimSpace(r.Stdout) != "make" {
		t.Fatalf("build --print: %q", r.Stdout)
	}
	r = a.must(7, "exec", inst, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Fatalf("exec streams: %q %q", r.Stdout, r.Stderr)
	}
	// A command that is not there: the shell's status and one plain line,
	// not the OCI runtime's errors.
	r = a.must(127, "exec", inst, "--", "no-such-command", "x")
	if strings.TrimSpace(r.Stderr) != "stemctl exec: no-such-command: command not found in the instance" {
		t.Fatalf("exec of a missing command: %q", r.Stderr)
	}
	r = a.must(0, "exec", inst, "--", "sh", "-c", `printf '%s|' "$0" "$@"`, "zero", "a b", "")
	if r.Stdout != "zero|a b||" {
		t.Fatalf("exec arguments: %q", r.Stdout)
	}
	a.must(1, "deploy", inst) // no deploy command for a native task
	// MCP selection.
	a.must(0, "mcp", "select", inst)
	r = a.must(0, "mcp", "status", "--json")
	if !strings.Contains(r.Stdout, `"ok": true`) {
		t.Fatalf("mcp status: %s", r.Stdout)
	}
	r = a.must(0, "mcp", "call", "--level", "observe", "session_status")
	if !strings.Contains(r.Stdout, up.Record.ContainerID) {
		t.Fatalf("mcp call: %s", r.Stdout)
	}
	// Through stem-mcp call: a tool's error is exit status 1 with the
	// result printed; --json is the whole result; resources read.
	r = a.must(1, "mcp", "call", "--level", "observe", "--json", "pane_capture", "pane=%999")
	if !strings.Contains(r.Stdout, `"isError": true`) || !strings.Contains(r.Stdout, "%999") {
		t.Fatalf("mcp call of a missing pane: %s", r.Stdout)
	}
	r = a.must(0, "mcp", "call", "--level", "observe", "resource:stem://context")
	if !strings.Contains(r.Stdout, `"instance": "`+inst+`"`) {
		t.Fatalf("mcp call resource: %s", r.Stdout)
	}
	r = a.must(1, "mcp", "call", "--level", "observe", "nvim_open", "path=x.c")
	if !strings.Contains(r.Stdout+r.Stderr, "nvim_open") {
		t.Fatalf("mcp call of an assist tool at observe: %+v", r)
	}
	// Down: status says stopped (exit 3); up starts it again.
	a.must(0, "down", inst, "--timeout", "1s")
	r = a.must(3, "status", inst, "--json")
	if !strings.Contains(r.Stdout, `"state": "stopped"`) {
		t.Fatalf("status after down: %s", r.Stdout)
	}
	a.must(3, "mcp", "status")
	r = a.must(0, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stdout, "started") {
		t.Fatalf("up after down: %s", r.Stdout)
	}
	// rm: gone, selection cleared.
	a.must(0, "rm", inst)
	a.must(1, "status", inst)
	r = a.must(3, "mcp", "status", "--json")
	if !strings.Contains(r.Stdout, `"selected": false`) {
		t.Fatalf("selection survived rm: %s", r.Stdout)
	}
	// The audit log recorded the selection and the MCP session.
	r = a.must(0, "audit", "verify")
	r = a.must(0, "audit", "show", "--json")
	for _, ev := range []string{`"select"`, `"session_start"`, `"session_end"`} {
		if !strings.Contains(r.Stdout, ev) {
			t.Errorf("audit lacks %s", ev)
		}
	}
}

func TestAttachThroughAPseudoTerminal(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	r := a.must(0, "status", inst, "--json")
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	json.Unmarshal([]byte(r.Stdout), &st)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")

	// A real terminal: stemctl hands tmux the terminal itself.
	cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "attach", inst)
	cmd.Env = a.Env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	screen := record(f)
	waitFor(t, 10*time.Second, "a terminal client attached", func() bool {
		out, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode}").Output()
		return strings.Contains(string(out), "0")
	})
	f.Write([]byte{0x02, 'd'}) // C-b d: detach
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("attach did not end after detach")
	}
	// The last bytes may still be on their way from the pty after the exit.
	waitFor(t, 5*time.Second, "the detach message on the terminal", screen.shows("detached"))

	// Not a terminal: stemctl gives tmux a pseudo-terminal and relays.
	cmd = exec.Command(filepath.Join(bins(t), "stemctl"), "attach", inst)
	cmd.Env = a.Env
	in, _ := cmd.StdinPipe()
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the relayed client attached", func() bool {
		o, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode}").Output()
		return strings.Contains(string(o), "0")
	})
	io.WriteString(in, "\x02d")
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relayed attach exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("relayed attach did not end after detach")
	}
	// Wait has copied all of stdout: the relay carried tmux's screen.
	if !strings.Contains(out.String(), "detached") {
		t.Fatalf("the relayed attach did not pass tmux's output on: %q", out.String())
	}
}

// screen collects what a pseudo-terminal shows.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// record reads f until it ends, keeping everything it shows.
func record(f io.Reader) *screen {
	s := &screen{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// shows is a waitFor condition: the screen contains text.
func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *screen) shows(text string) func() bool {
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return strings.Contains(s.buf.String(), text)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOCIErrorExplained points stemctl at a private Podman service that
// cannot start containers (ociFault: on a host that needs the repository's
// containers.conf, a service without it): the runtime error must come
// back with what to do, and say which configuration the service runs with.
func TestOCIErrorExplained(t *testing.T) {
	a := newAccount(t)
	sockDir, err := os.MkdirTemp("/tmp", "pd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "p.sock")
	fault, service := ociFault(t)
	saved := a.Env
	a.Env = withoutConf(a.Env, append(fault, "CONTAINER_HOST=unix://"+sock)...)
	r, err := a.run("up", "native-amd64", "demo", "hello", "1")
	if _, serr := os.Stat(sock); serr == nil {
		defer syscall.Kill(listenerPID(t, sock), syscall.SIGTERM)
	}
	// The account's cleanup must talk to the usual service, or stemctl
	// would start this private one again after it was stopped.
	a.Env = saved
	if err != nil {
		t.Fatal(err)
	}
	if r.Code == 0 {
		t.Fatal("up succeeded through a service that cannot start containers")
	}
	for _, w := range []string{"hint: ", "containers.conf", "ulimit", "service: ", service} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the OCI error is not explained (no %q):\n%s", w, r.Stderr)
		}
	}
	t.Logf("explained: %s", r.Stderr)
}

// TestDevicePolicy: only the device named with --device enters an rp2350
// container; without one, deploy says what is missing.
func TestDevicePolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a device node under /dev and needs root (CI runs as root)")
	}
	a := newAccount(t)
	// A node with the CDC ACM major (a Pico's or a Debug Probe's UART)
	// stands in for a plugged-in board.
	node := fmt.Sprintf("/dev/stemtest%d", os.Getpid())
	if out, err := exec.Command("mknod", "-m", "0666", node, "c", "166", "252").CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v %s", err, out)
	}
	defer os.Remove(node)
	// A character device that is not USB (here /dev/null's numbers) stays out.
	other := fmt.Sprintf("/dev/stemtest-null%d", os.Getpid())
	if out, err := exec.Command("mknod", "-m", "0666", other, "c", "1", "3").CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v %s", err, out)
	}
	defer os.Remove(other)
	if r := a.must(1, "up", "rp2350", "demo", "hello", "3", "--device", other); !strings.Contains(r.Stderr, "not a USB device") {
		t.Fatalf("a non-USB device: %s", r.Stderr)
	}

	r := a.must(1, "deploy", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv")
	for _, w := range []string{"no device was passed", "--device"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("deploy without a device: stderr lacks %q:\n%s", w, r.Stderr)
		}
	}
	a.must(0, "up", "rp2350", "demo", "hello", "3", "--target", "rp2350-arm", "--device", node)
	r = a.must(0, "exec", "rp2350-demo-hello-t3-arm", "--", "sh", "-c", `test -c "$STEM_DEVICE" && echo "$STEM_DEVICE"`)
	if strings.TrimSpace(r.Stdout) != node {
		t.Fatalf("the named device is not in the container: %q", r.Stdout)
	}
	// The other target's instance, started without --device, does not see it.
	a.must(0, "up", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv")
	a.must(1, "exec", "rp2350-demo-hello-t3-rv", "--", "test", "-e", node)
	// Both targets' example builds compile in the image.
	a.must(0, "build", "rp2350-demo-hello-t3-arm")
	a.must(0, "build", "rp2350-demo-hello-t3-rv")
}

// exec with a terminal gives the process the local terminal's size and
// follows it when the terminal is resized.
func TestExecTerminalFollowsResize(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "exec", inst, "--", "sh", "-c", `stty size; while read x; do stty size; done`)
	cmd.Env = a.Env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	screen := record(f)
	defer func() {
		if t.Failed() {
			t.Logf("the terminal showed: %q", screen.String())
		}
	}()
	// Bounds for a loaded machine: an exec through the Podman API has
	// taken over 10 s with the whole suite running on two cores. The
	// first thing the process does is read its size, and it must read the
	// terminal's, not the 0 0 of a terminal conmon has not sized yet.
	waitFor(t, time.Minute, "the first size", screen.shows("\n"))
	if first, _, _ := strings.Cut(strings.TrimSpace(screen.String()), "\n"); strings.TrimSpace(first) != "30 100" {
		t.Fatalf("the process's first size is %q, want 30 100", first)
	}
	if err := pty.Setsize(f, &pty.Winsize{Rows: 41, Cols: 123}); err != nil {
		t.Fatal(err)
	}
	// The resize travels stemctl -> Podman API -> the exec session's pty:
	// ask again (Enter runs stty size) until it has arrived, rather than
	// once after a fixed pause that load can outlast.
	newSize := screen.shows("41 123")
	waitFor(t, time.Minute, "the new size 41 123", func() bool {
		if newSize() {
			return true
		}
		f.Write([]byte("\r"))
		return false
	})
	f.Write([]byte("\x04")) // end of input: the loop and sh end
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("exec did not end")
	}
}

// Podman missing (no service answering, no podman binary to start one):
// stemctl says how to install it and creates nothing.
func TestMissingPodmanExplained(t *testing.T) {
	a := newAccount(t)
	dead := filepath.Join(t.TempDir(), "none.sock")
	env := []string{"CONTAINER_HOST=unix://" + dead, "PATH=" + t.TempDir()}
	for _, args := range [][]string{{"up", "native-amd64", "demo", "hello", "1"}, {"list"}} {
		r, err := a.Run(env, args...)
		if err != nil {
			t.Fatal(err)
		}
		if r.Code == 0 || !strings.Contains(r.Stderr, "apt-get install podman") {
			t.Fatalf("stemctl %v without podman: exit %d\n%s", args, r.Code, r.Stderr)
		}
	}
	// With podman back nothing was left behind.
	r := a.must(0, "list", "--json")
	if strings.TrimSpace(r.Stdout) != "[]" {
		t.Fatalf("an instance appeared: %s", r.Stdout)
	}
}

// Shell completion of flag values the way a shell asks for them.
func TestFlagCompletion(t *testing.T) {
	a := newAccount(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"up", "rp2350", "demo", "hello", "3", "--target", ""}, []string{"rp2350-rv\t", "rp2350-arm\t"}},
		{[]string{"agent", "start", "codex", "rp2350", "demo", "hello", "3", "--target", ""}, []string{"rp2350-arm\t"}},
		{[]string{"build", "hazard3-sim", "inf", "bss", "4", "--target", ""}, []string{"rv32\t"}},
		{[]string{"teacher", "config", "--provider", ""}, []string{"codex\n", "claude\n", "gemini\n"}},
		{[]string{"access", "grant", "--level", ""}, []string{"observe\n", "assist\n", "full\n"}},
		{[]string{"mcp", "call", "--level", ""}, []string{"full\n"}},
	} {
		r := a.must(0, append([]string{"__complete"}, c.args...)...)
		for _, w := range c.want {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("completion of %q lacks %q:\n%s", c.args, w, r.Stdout)
			}
		}
		if !strings.Contains(r.Stdout, ":4") {
			t.Errorf("completion of %q offers file names:\n%s", c.args, r.Stdout)
		}
	}
}

// An attached tmux client does what its server says: detach-client -E and
// lock-command make it run a shell command in its own process. The server is
// the container's, so stemctl attach must never put that client on the host.
// Here the container (as any program in it could) tells the student's
// attached client to create a file; the file must not appear on the host.
func TestAttachedClientCannotRunHostCommands(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	r := a.must(0, "status", inst, "--json")
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	json.Unmarshal([]byte(r.Stdout), &st)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")
	hostDir := t.TempDir() // exists on the host only

	// Each command also leaves a mark in the container's /tmp: once it is
	// there the client has run the command, inside, and the host's
	// directory can be checked.
	for _, attack := range []struct{ name, mark, script string }{
		{"detach-client -E", "/tmp/ran-detach", `tmux -S "$1" detach-client -t "$2" -E "touch $3/detach; touch /tmp/ran-detach"`},
		{"lock-command", "/tmp/ran-lock", `tmux -S "$1" set -g lock-command "touch $3/lock; touch /tmp/ran-lock" \; lock-client -t "$2"`},
	} {
		cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "attach", inst)
		cmd.Env = a.Env
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
		if err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, f)
		var client string
		waitFor(t, 10*time.Second, "a terminal client attached", func() bool {
			out, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode} #{client_name}").Output()
			for _, l := range strings.Split(string(out), "\n") {
				if c, ok := strings.CutPrefix(l, "0 "); ok {
					client = c
					return true
				}
			}
			return false
		})
		a.must(0, "exec", inst, "--", "sh", "-c", attack.script, "sh", sock, client, hostDir)
		waitFor(t, 20*time.Second, attack.name+": the client ran the command", func() bool {
			if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
				return true // on the host: reported below
			}
			r, err := a.run("exec", inst, "--", "test", "-e", attack.mark)
			return err == nil && r.Code == 0
		})
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
		if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
			t.Fatalf("%s: the container ran a command on the host through the attached client (%s appeared)", attack.name, ents[0].Name())
		}
		exec.Command("tmux", "-S", sock, "set", "-gu", "lock-command").Run()
		exec.Command("tmux", "-S", sock, "detach-client", "-a").Run()
	}

	// stem-mcp's control-mode client on the host is told the same.
	a.must(0, "mcp", "select", inst)
	c, err := client.NewStdioMCPClient(filepath.Join(bins(t), "stem-mcp"), a.Env, "serve", "--level", "observe")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	mcpCall(t, c, "pane_list", nil) // connects the control client
	var ctl string
	waitFor(t, 10*time.Second, "stem-mcp's control client", func() bool {
		out, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode} #{client_name}").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(l, "1 "); ok {
				ctl = c
				return true
			}
		}
		return false
	})
	a.must(0, "exec", inst, "--", "sh", "-c", `tmux -S "$1" set -g lock-command "touch $3/ctl-lock" \; lock-client -t "$2"; tmux -S "$1" detach-client -t "$2" -E "touch $3/ctl-detach"`, "sh", sock, ctl, hostDir)
	// The server sent both before the exec returned; a call through the
	// same client reads what came before its answer.
	mcpCall(t, c, "pane_list", nil)
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Fatalf("the container ran a command on the host through stem-mcp's control client (%s appeared)", ents[0].Name())
	}
}

// After stem-mcp is rebuilt an instance's configuration differs. build (or
// debug, agent start) must not end the student's session over it; up asks
// before losing unsaved editor buffers; up --force re-creates.
func TestRebuildNeverEndsASessionBehindTheStudentsBack(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	// This account's own stem-mcp, so rebuilding it touches no other test.
	own := filepath.Join(t.TempDir(), "stem-mcp")
	data, err := os.ReadFile(filepath.Join(bins(t), "stem-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(own, data, 0o755)
	env := []string{"STEM_MCP_BIN=" + own}
	run := func(code int, args ...string) result {
		t.Helper()
		r, err := a.Run(env, args...)
		if err != nil || r.Code != code {
			t.Fatalf("stemctl %v: exit %d (want %d) %v\n%s%s", args, r.Code, code, err, r.Stdout, r.Stderr)
		}
		return r
	}
	run(0, "up", "native-amd64", "demo", "hello", "1")
	r := run(0, "status", inst, "--json")
	var st struct {
		Record struct {
			ContainerID string `json:"container_id"`
			SocketDir   string `json:"socket_dir"`
			CardPath    string `json:"card_path"`
		} `json:"record"`
	}
	json.Unmarshal([]byte(r.Stdout), &st)
	// The student has an unsaved edit.
	file := filepath.Join(st.Record.CardPath, "t1", "hello.c")
	nv := exec.Command("nvim", "--server", filepath.Join(st.Record.SocketDir, "n.sock"), "--remote-send", "<C-\\><C-n>:e "+file+"<CR>ggO/* unsaved */<Esc>")
	if out, err := nv.CombinedOutput(); err != nil {
		t.Fatalf("nvim --remote-send: %v %s", err, out)
	}
	// stem-mcp is rebuilt.
	os.WriteFile(own, append(data, 0), 0o755)

	r = run(1, "build", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stderr, "run `stemctl up native-amd64 demo hello 1") {
		t.Fatalf("build over a changed config: %s", r.Stderr)
	}
	r = run(1, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stderr, "unsaved changes in "+file) || !strings.Contains(r.Stderr, "--force") {
		t.Fatalf("up over an unsaved buffer: %s", r.Stderr)
	}
	r = run(0, "status", inst, "--json")
	if !strings.Contains(r.Stdout, st.Record.ContainerID) {
		t.Fatal("a refused up still replaced the container")
	}
	run(0, "up", "native-amd64", "demo", "hello", "1", "--force")
	r = run(0, "status", inst, "--json")
	if strings.Contains(r.Stdout, st.Record.ContainerID) {
		t.Fatal("up --force did not re-create the instance")
	}
}

// down keeps the editor's unsaved work safe: it refuses and names the
// buffers, and --force discards them.
func TestDownKeepsUnsavedWork(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	r := a.must(0, "status", inst, "--json")
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
			CardPath  string `json:"card_path"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatal(err)
	}
	// Nothing unsaved: down stops it, up starts it again.
	a.must(0, "down", inst)
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	file := filepath.Join(st.Record.CardPath, "t1", "words.c")
	sock := filepath.Join(a.statusDir(t, inst), "n.sock")
	// :silent, so that no message waits for Enter and eats the keys after
	// it; then wait until Neovim has taken them.
	nv := exec.Command("nvim", "--server", sock, "--remote-send", "<C-\\><C-n>:silent e "+file+"<CR>ggO/* unsaved */<Esc>")
	if out, err := nv.CombinedOutput(); err != nil {
		t.Fatalf("nvim --remote-send: %v %s", err, out)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, _ := exec.CommandContext(ctx, "nvim", "--server", sock, "--remote-expr", "&modified").CombinedOutput()
		cancel()
		if strings.TrimSpace(string(out)) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit never reached Neovim's buffer: &modified = %q", out)
		}
	}
	r = a.must(1, "down", inst)
	if !strings.Contains(r.Stderr, "unsaved changes in "+file) || !strings.Contains(r.Stderr, "stemctl down "+inst+" --force") {
		t.Fatalf("down over an unsaved buffer: %s", r.Stderr)
	}
	if r := a.must(0, "list", "--json"); !strings.Contains(r.Stdout, `"state": "running"`) {
		t.Fatalf("a refused down stopped the instance: %s", r.Stdout)
	}
	a.must(0, "down", inst, "--force")
	if r := a.must(0, "list", "--json"); strings.Contains(r.Stdout, `"state": "running"`) {
		t.Fatalf("down --force left it running: %s", r.Stdout)
	}
	// What --force discarded stays discarded: the next editor opens the
	// file without a question about the old one's swap file.
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	sock = filepath.Join(a.statusDir(t, inst), "n.sock")
	expr := func(e string) string {
		out, err := exec.Command("nvim", "--server", sock, "--remote-expr", e).CombinedOutput()
		if err != nil {
			t.Fatalf("nvim --remote-expr %s: %v %s", e, err, out)
		}
		return string(out)
	}
	waitFor(t, 30*time.Second, "the editor opened words.c or said why not", func() bool {
		return expr(`bufloaded("words.c")`) == "1" || strings.Contains(expr(`execute("messages")`), "swap")
	})
	if m := expr(`execute("messages")`); strings.Contains(m, "swap") {
		t.Fatalf("after down --force the editor asks about a swap file: %s", m)
	}
	// An editor at a prompt does not say what it has unsaved: down
	// refuses rather than guess.
	if out, err := exec.Command("nvim", "--server", sock, "--remote-send", `<C-\><C-n>:echo "1\n2\n3"<CR>`).CombinedOutput(); err != nil {
		t.Fatalf("nvim --remote-send: %v %s", err, out)
	}
	tsock := filepath.Join(a.statusDir(t, inst), "t.sock")
	waitFor(t, 20*time.Second, "the editor waits at its prompt", func() bool {
		return strings.Contains(a.tmuxOut(tsock, "capture-pane", "-p", "-t", "stem:0"), "Press ENTER")
	})
	r = a.must(1, "down", inst)
	if !strings.Contains(r.Stderr, "does not say whether it has unsaved changes") || !strings.Contains(r.Stderr, "--force") {
		t.Fatalf("down over an editor at a prompt: %s", r.Stderr)
	}
	if r := a.must(0, "list", "--json"); !strings.Contains(r.Stdout, `"state": "running"`) {
		t.Fatalf("a refused down stopped the instance: %s", r.Stdout)
	}
	exec.Command("nvim", "--server", sock, "--remote-send", "<CR>").Run()
	waitFor(t, 20*time.Second, "the editor left its prompt", func() bool { return expr("mode(1)") == "n" })
	a.must(0, "down", inst)
}

// statusDir is the instance's current socket directory.
func (a *account) statusDir(t *testing.T, inst string) string {
	t.Helper()
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	return st.Record.SocketDir
}
