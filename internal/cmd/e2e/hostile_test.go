package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
	"github.com/stem-edu/stem/internal/testenv"
)

// helperEnv makes the test binary run goClientHelper instead of the tests
// (see TestMain): the control, go-client used as stem used it before.
const helperEnv = "STEM_E2E_GOCLIENT_SOCKET"

// goClientHelper dials the socket with go-client as it comes (by path,
// its own decoder, its default logger writing to stderr) and asks for the
// mode.
func goClientHelper(sock string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := gonvim.Dial(sock, gonvim.DialContext(ctx))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 2
	}
	_, err = v.Mode()
	fmt.Fprintln(os.Stderr, "mode:", err)
	v.Close()
	return 0
}

// runGoClient runs goClientHelper on sock in a child limited to 4 GiB of
// address space, so an allocation of 64 GiB fails at once on any host.
func runGoClient(t *testing.T, sock string) (stderr string, err error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `ulimit -v 4000000; exec "$0" -test.run=NONE`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+sock)
	var e bytes.Buffer
	cmd.Stderr = &e
	err = cmd.Run()
	return e.String(), err
}

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// raw finds what a terminal would act on: ESC, BEL, or an 8-bit CSI/OSC.
var raw = regexp.MustCompile("\x1b|\x07|\u009b|\u009d")

// crashed finds the signs of a Go runtime that died.
var crashed = regexp.MustCompile(`fatal error|out of memory|goroutine \d+|panic:`)

// TestHostileNeovimInsideTheContainer stops Neovim inside a real instance
// and serves n.sock from a hostile static program copied into the card,
// then runs stem's host side against it:
//
//  1. huge: the server answers `94 01 <id> dd ff ff ff ff`. go-client as
//     stem used it dies of an out-of-memory fatal error (the control);
//     stemctl status, list and up and a running stem-mcp session report
//     this Neovim as broken and go on, and so do the gate's status, mcp
//     select, mcp status, mcp call at each level, agent start and debug.
//  2. text: the server sends a request and a notification named with
//     escape sequences and answers with an error made of them. go-client
//     as it comes answers the request and logs the escapes raw (the
//     control); stem's outputs carry none (the same entry points), and
//     stem answers nothing.
//  3. symlink: n.sock is replaced by a symlink to a host socket (the
//     canary's listener). `stemctl up`, asked to re-create the instance
//     (its configuration changed), refuses without connecting there; a
//     plain connect through the link (the control) reaches the host.
//
// Finally `up --force` re-creates the instance and it is healthy again.
func TestHostileNeovimInsideTheContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Podman and the native-amd64 image")
	}
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	own := filepath.Join(t.TempDir(), "stem-mcp") // this account's: changed in step 3
	mcpData, err := os.ReadFile(filepath.Join(bins(t), "stem-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, mcpData, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"STEM_MCP_BIN=" + own}
	run := func(code int, args ...string) result {
		t.Helper()
		r, err := a.Run(env, args...)
		if err != nil || r.Code != code {
			t.Fatalf("stemctl %v: exit %d (want %d) %v\nstdout: %s\nstderr: %s", args, r.Code, code, err, r.Stdout, r.Stderr)
		}
		if raw.MatchString(r.Stdout + r.Stderr) {
			t.Fatalf("stemctl %v printed escape sequences:\nstdout: %q\nstderr: %q", args, r.Stdout, r.Stderr)
		}
		if crashed.MatchString(r.Stderr) {
			t.Fatalf("stemctl %v crashed:\n%s", args, r.Stderr)
		}
		return r
	}
	run(0, "up", "native-amd64", "demo", "hello", "1")
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
			CardPath  string `json:"card_path"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(run(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	nsock, tsock := filepath.Join(st.Record.SocketDir, "n.sock"), filepath.Join(st.Record.SocketDir, "t.sock")
	hostile := filepath.Join(st.Record.CardPath, "hostilenvim")
	built := filepath.Join(testenv.Binary(t, "hostilenvim", "./internal/cmd/e2e/testdata/hostilenvim"), "hostilenvim")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostile, data, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(mode string) (log string) {
		t.Helper()
		dir := filepath.Join(st.Record.CardPath, "hostile-"+mode)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777) // the student in the container writes here
		log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
		run(0, "exec", inst, "--", "sh", "-c",
			// Both remove their socket as they end: the hostile server
			// starts once they are gone, or its n.sock could go with them.
			// What SIGTERM has not ended in 5 s (a stopped process does
			// not act on it) gets SIGKILL and is listed; zombies do not
			// count. A run once hung here for its whole three minutes.
			`left() { pgrep -x -r D,R,S,T,t nvim >/dev/null || pgrep -x -r D,R,S,T,t hostilenvim >/dev/null; }; `+
				`pkill -x nvim; pkill -x hostilenvim; i=0; `+
				`while left; do i=$((i+1)); `+
				`if [ $i = 100 ]; then echo "still running after SIGTERM:" >&2; ps -eo pid,ppid,stat,comm,args >&2; pkill -KILL -x nvim; pkill -KILL -x hostilenvim; fi; `+
				`if [ $i -gt 600 ]; then echo "still running after SIGKILL:" >&2; ps -eo pid,ppid,stat,comm,args >&2; exit 3; fi; sleep 0.05; done; `+
				`tmux -S "$1" new-window -d "$2 -mode $3 -sock $4 -log $5 -ready $6"`,
			"sh", tsock, hostile, mode, nsock, log, ready)
		waitFor(t, 20*time.Second, "the hostile server in the container", func() bool { _, err := os.Stat(ready); return err == nil })
		return log
	}

	// A session that was serving before Neovim was taken over.
	run(0, "mcp", "select", inst)
	mcpErr := &lockedBuffer{}
	c, err := client.NewStdioMCPClientWithOptions(filepath.Join(bins(t), "stem-mcp"), append(append([]string{}, a.Env...), env...),
		[]string{"serve", "--level", "observe"}, transport.WithCommandStderrWriter(mcpErr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-hostile", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if _, isErr := mcpCall(t, c, "nvim_status", nil); isErr {
		t.Fatal("nvim_status failed on a healthy instance")
	}

	// The other host entry points that reach the instance's Neovim (the
	// ones the hostile tmux test runs too): each may fail, but none may
	// crash, print the server's escapes, or go quiet about why. The
	// gate's status names the instance with the server's claim or text.
	grantID, configDir := grantObserve(t, a)
	sweep := func(mode, want string) {
		t.Helper()
		gate := exec.Command(filepath.Join(a.Bin, "stem-mcp"), "gate", "--grant", grantID, "--config-dir", configDir)
		gate.Env = append(append(append([]string{}, a.Env...), env...), "SSH_ORIGINAL_COMMAND=status", "SSH_CONNECTION=192.0.2.7 50022 192.0.2.1 22")
		var gout, gerr bytes.Buffer
		gate.Stdout, gate.Stderr = &gout, &gerr
		if err := gate.Run(); err != nil || raw.MatchString(gout.String()+gerr.String()) || crashed.MatchString(gerr.String()) || !strings.Contains(gout.String(), want) {
			t.Errorf("%s: the gate's status (%v) lacks %q or is not clean:\nstdout: %q\nstderr: %q", mode, err, want, gout.String(), gerr.String())
		}
		for _, args := range [][]string{
			{"mcp", "select", inst},
			{"mcp", "status"},
			{"mcp", "call", "--level", "observe", "nvim_status"},
			{"mcp", "call", "--level", "assist", "nvim_status"},
			{"mcp", "call", "--level", "full", "nvim_status"},
			{"agent", "start", "claude", "native-amd64", "demo", "hello", "1"},
			{"agent", "stop", "--all", "--timeout", "5s"},
			{"debug", inst},
		} {
			r, err := a.Run(append([]string{"PATH=" + fakeAgent(t) + ":" + a.Bin + ":" + os.Getenv("PATH")}, env...), args...)
			if err != nil {
				t.Fatalf("%s: stemctl %v: %v", mode, args, err)
			}
			t.Logf("%s: stemctl %s: exit %d\n%s%s", mode, strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
			if raw.MatchString(r.Stdout+r.Stderr) || crashed.MatchString(r.Stderr) {
				t.Errorf("%s: stemctl %v crashed or printed escape sequences:\nstdout: %q\nstderr: %q", mode, args, r.Stdout, r.Stderr)
			}
		}
	}

	// 1. huge.
	start(nvimtest.HostileHuge)
	if out, err := runGoClient(t, nsock); err == nil || !strings.Contains(out, "out of memory") {
		t.Fatalf("control: go-client as it comes survived the five-byte reply (%v):\n%s", err, out)
	}
	r := run(3, "status", inst)
	t.Logf("status over the huge-claim server:\n%s", r.Stdout)
	for _, want := range []string{"nvim       does not answer", "array of 4294967295 elements", "treats this Neovim as broken"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.Stdout)
		}
	}
	if r := run(0, "list"); !regexp.MustCompile(inst + `\s+unhealthy`).MatchString(r.Stdout) {
		t.Errorf("list does not show the instance as unhealthy:\n%s", r.Stdout)
	}
	r = run(1, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stderr, "treats this Neovim as broken") || !strings.Contains(r.Stderr, "--force") {
		t.Errorf("up over a broken nvim does not say what to do:\n%s", r.Stderr)
	}
	if out, isErr := mcpCall(t, c, "nvim_status", nil); !isErr || !strings.Contains(out, "array of 4294967295 elements") {
		t.Errorf("stem-mcp's nvim_status over the broken nvim: %v %s", isErr, out)
	}
	if _, isErr := mcpCall(t, c, "pane_list", nil); isErr {
		t.Error("pane_list failed while only nvim is broken")
	}
	sweep("huge", "array of 4294967295 elements")

	// 2. text.
	log := start(nvimtest.HostileText)
	out, err := runGoClient(t, nsock)
	if err != nil || !strings.Contains(out, "\x1b]0;pwned") {
		t.Fatalf("control: go-client's default logger did not print the escapes raw (%v): %q", err, out)
	}
	waitFor(t, 10*time.Second, "the control's connection to end", func() bool { return strings.Contains(readFile(log), "conn 1 closed") })
	if !strings.Contains(readFile(log), "conn 1 kind 1") {
		t.Fatalf("control: go-client did not answer the server's request:\n%s", readFile(log))
	}
	r = run(3, "status", inst)
	t.Logf("status over the escape-text server:\n%s", r.Stdout)
	if !strings.Contains(r.Stdout, nvimtest.EvilVisible) {
		t.Errorf("status lost the server's error text:\n%s", r.Stdout)
	}
	run(0, "list")
	run(0, "list", "--json")
	run(3, "status", inst, "--json")
	run(1, "up", "native-amd64", "demo", "hello", "1")
	if out, isErr := mcpCall(t, c, "nvim_status", nil); !isErr || raw.MatchString(out) || !strings.Contains(out, nvimtest.EvilVisible) {
		t.Errorf("stem-mcp's nvim_status: %v %q", isErr, out)
	}
	sweep("text", nvimtest.EvilVisible)
	c.Close()
	waitFor(t, 10*time.Second, "every connection to end", func() bool {
		l := readFile(log)
		for _, m := range regexp.MustCompile(`conn (\d+) kind`).FindAllStringSubmatch(l, -1) {
			if !strings.Contains(l, "conn "+m[1]+" closed") {
				return false
			}
		}
		return true
	})
	if m := regexp.MustCompile(`conn ([2-9]|\d\d+) kind 1`).FindString(readFile(log)); m != "" {
		t.Errorf("stem answered the server's request (%s):\n%s", m, readFile(log))
	}
	if raw.MatchString(mcpErr.String()) || crashed.MatchString(mcpErr.String()) {
		t.Errorf("stem-mcp's log: %q", mcpErr.String())
	}

	// 3. symlink.
	hostDir := t.TempDir()
	canary := filepath.Join(hostDir, "connected")
	ln, err := net.Listen("unix", filepath.Join(hostDir, "host.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			os.WriteFile(canary, nil, 0o600)
			c.Close()
		}
	}()
	run(0, "exec", inst, "--", "sh", "-c", `pkill -x hostilenvim; rm -f "$2" && ln -s "$1" "$2"`, "sh", filepath.Join(hostDir, "host.sock"), nsock)
	if fi, err := os.Lstat(nsock); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("n.sock is not the planted symlink: %v", err)
	}
	// stem-mcp rebuilt: up must re-create. Renamed into place, as an
	// install does: debug's gdb bridge may still run the old one.
	if err := os.WriteFile(own+".new", append(mcpData, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(own+".new", own); err != nil {
		t.Fatal(err)
	}
	r = run(1, "up", "native-amd64", "demo", "hello", "1")
	t.Logf("up over the symlinked n.sock: %s", r.Stderr)
	if !strings.Contains(r.Stderr, "must be re-created") || !strings.Contains(r.Stderr, "n.sock is a symlink") {
		t.Errorf("up over a symlinked n.sock:\n%s", r.Stderr)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("stemctl up connected to the host socket the symlink named")
	}
	cc, err := net.Dial("unix", nsock) // the control: by path, the link leads to the host
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	cc.Close()
	waitFor(t, 10*time.Second, "the control to reach the host socket", func() bool { _, err := os.Stat(canary); return err == nil })

	// up --force repairs it.
	run(0, "up", "native-amd64", "demo", "hello", "1", "--force")
	run(0, "status", inst)
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}
