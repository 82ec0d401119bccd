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
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/testenv"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins builds stemctl and stem-mcp once per test process.
func bins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "stem-e2e-bin")
		if buildErr != nil {
			return
		}
		for _, c := range [][]string{{"stemctl", "./cmd/stemctl"}, {"stem-mcp", "./cmd/stem-mcp"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, c[0]), c[1])
			cmd.Dir = testenv.RepoRoot()
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", c[0], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type account struct {
	t   *testing.T
	env []string
	ws  string
	rt  string
}

func newAccount(t *testing.T) *account {
	t.Helper()
	testenv.Require(t, "podman", "tmux")
	rt, err := os.MkdirTemp("/tmp", "se")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join(testenv.RepoRoot(), "examples", "workspace")+"/.", ws).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	a := &account{t: t, ws: ws, rt: rt, env: []string{
		"PATH=" + bins(t) + ":" + os.Getenv("PATH"), "HOME=" + filepath.Join(base, "home"),
		"XDG_RUNTIME_DIR=" + rt, "STEM_STATE_DIR=" + filepath.Join(base, "state"), "STEM_CONFIG_DIR=" + filepath.Join(base, "config"),
		"STEM_WORKSPACE=" + ws, "TERM=xterm",
	}}
	if cc := os.Getenv("CONTAINERS_CONF"); cc != "" {
		a.env = append(a.env, "CONTAINERS_CONF="+cc)
	}
	os.MkdirAll(filepath.Join(base, "home"), 0o700)
	t.Cleanup(func() {
		out, _ := a.run("list", "--json")
		var sts []struct {
			Record struct{ Instance string } `json:"record"`
		}
		json.Unmarshal([]byte(out.stdout), &sts)
		for _, s := range sts {
			a.run("rm", s.Record.Instance)
		}
		os.RemoveAll(rt)
	})
	return a
}

type result struct {
	stdout, stderr string
	code           int
}

func (a *account) run(args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins(a.t), "stemctl"), args...)
	cmd.Env = a.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
		err = nil
	}
	return r, err
}

// must runs stemctl and requires the exit code.
func (a *account) must(code int, args ...string) result {
	a.t.Helper()
	r, err := a.run(args...)
	if err != nil {
		a.t.Fatalf("stemctl %v: %v", args, err)
	}
	if r.code != code {
		a.t.Fatalf("stemctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, code, r.stdout, r.stderr)
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
		{[]string{"up", "native-amd64", "inf", "bss", "4"}, []string{"runs on hazard3-sim, not on native-amd64"}},
		{[]string{"up", "rp2350", "demo", "hello", "3", "--target", "rp2040"}, []string{`unknown target "rp2040"`, "rp2350-arm"}},
		{[]string{"up", "native-amd64", "demo", "hello", "1", "--device", "/dev/null"}, []string{"takes no devices"}},
		{[]string{"status", "nope"}, []string{"no such instance", "stemctl up"}},
		{[]string{"up", "native-amd64", "demo"}, []string{"takes 4 argument(s)", "PROFILE SERIES CARD TASK"}},
	} {
		r, err := a.run(c.args...)
		if err != nil || r.code == 0 {
			t.Fatalf("%v: exit %d %v", c.args, r.code, err)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, r.stderr)
			}
		}
	}
	r := a.must(0, "list", "--json")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("bad input created instances: %s", r.stdout)
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
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil || up.Action != "created" {
		t.Fatalf("up --json: %v %s", err, r.stdout)
	}
	a.must(0, "status", inst)
	r = a.must(0, "list", "--json")
	if !strings.Contains(r.stdout, `"state": "running"`) {
		t.Fatalf("list: %s", r.stdout)
	}
	// Task verbs: the manifest's commands, inside, exit codes passed on.
	a.must(0, "build", inst)
	r = a.must(0, "test", inst)
	r = a.must(0, "run", "native-amd64", "demo", "hello", "1")
	if r.stdout == "" {
		t.Fatal("run printed nothing")
	}
	r = a.must(0, "build", inst, "--print")
	if strings.TrimSpace(r.stdout) != "make" {
		t.Fatalf("build --print: %q", r.stdout)
	}
	r = a.must(7, "exec", inst, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.stdout != "out\n" || r.stderr != "err\n" {
		t.Fatalf("exec streams: %q %q", r.stdout, r.stderr)
	}
	a.must(1, "deploy", inst) // no deploy command for a native task
	// MCP selection.
	a.must(0, "mcp", "select", inst)
	r = a.must(0, "mcp", "status", "--json")
	if !strings.Contains(r.stdout, `"ok": true`) {
		t.Fatalf("mcp status: %s", r.stdout)
	}
	r = a.must(0, "mcp", "call", "--level", "observe", "session_status")
	if !strings.Contains(r.stdout, up.Record.ContainerID) {
		t.Fatalf("mcp call: %s", r.stdout)
	}
	// Down: status says stopped (exit 3); up starts it again.
	a.must(0, "down", inst, "--timeout", "1s")
	r = a.must(3, "status", inst, "--json")
	if !strings.Contains(r.stdout, `"state": "stopped"`) {
		t.Fatalf("status after down: %s", r.stdout)
	}
	a.must(3, "mcp", "status")
	r = a.must(0, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.stdout, "started") {
		t.Fatalf("up after down: %s", r.stdout)
	}
	// rm: gone, selection cleared.
	a.must(0, "rm", inst)
	a.must(1, "status", inst)
	r = a.must(3, "mcp", "status", "--json")
	if !strings.Contains(r.stdout, `"selected": false`) {
		t.Fatalf("selection survived rm: %s", r.stdout)
	}
	// The audit log recorded the selection and the MCP session.
	r = a.must(0, "audit", "verify")
	r = a.must(0, "audit", "show", "--json")
	for _, ev := range []string{`"select"`, `"session_start"`, `"session_end"`} {
		if !strings.Contains(r.stdout, ev) {
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
	json.Unmarshal([]byte(r.stdout), &st)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")

	// A real terminal: stemctl hands tmux the terminal itself.
	cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "attach", inst)
	cmd.Env = a.env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var screen bytes.Buffer
	var mu sync.Mutex
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
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
	mu.Lock()
	if !strings.Contains(screen.String(), "detached") {
		t.Errorf("no detach message on the terminal: %q", screen.String())
	}
	mu.Unlock()

	// Not a terminal: stemctl gives tmux a pseudo-terminal and relays.
	cmd = exec.Command(filepath.Join(bins(t), "stemctl"), "attach", inst)
	cmd.Env = a.env
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
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("relayed attach did not end after detach")
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

// TestOCIErrorExplained points stemctl at a private Podman service started
// without the host's containers.conf on a host that needs it: the runtime
// error must come back with what to do. On a host that needs no
// configuration the container simply starts.
func TestOCIErrorExplained(t *testing.T) {
	if os.Getenv("CONTAINERS_CONF") == "" {
		t.Log("this host runs containers with Podman's defaults; the error path is covered by internal/engine/podman's provoked-error tests")
	}
	a := newAccount(t)
	sockDir, _ := os.MkdirTemp("/tmp", "pd")
	defer os.RemoveAll(sockDir)
	var env []string
	for _, kv := range a.env {
		if !strings.HasPrefix(kv, "CONTAINERS_CONF=") {
			env = append(env, kv)
		}
	}
	saved := a.env
	a.env = append(env, "CONTAINER_HOST=unix://"+filepath.Join(sockDir, "p.sock"))
	defer exec.Command("pkill", "-f", filepath.Join(sockDir, "p.sock")).Run()
	// The account's cleanup must talk to the usual service, or stemctl
	// would start this private one again after it was killed.
	defer func() { a.env = saved }()
	r, err := a.run("up", "native-amd64", "demo", "hello", "1")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		if r.code != 0 {
			t.Fatalf("up: %s", r.stderr)
		}
		return
	}
	if r.code == 0 {
		t.Fatal("up succeeded without the containers.conf this host needs")
	}
	if !strings.Contains(r.stderr, "containers.conf") && !strings.Contains(r.stderr, "ulimit") {
		t.Fatalf("the OCI error is not explained:\n%s", r.stderr)
	}
	t.Logf("explained: %s", r.stderr)
}

// TestDevicePolicy: only the device named with --device enters an rp2350
// container; without one, deploy says what is missing.
func TestDevicePolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a device node under /dev and needs root (CI runs as root)")
	}
	a := newAccount(t)
	node := fmt.Sprintf("/dev/stemtest%d", os.Getpid())
	if out, err := exec.Command("mknod", "-m", "0666", node, "c", "1", "3").CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v %s", err, out)
	}
	defer os.Remove(node)

	r := a.must(1, "deploy", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv")
	for _, w := range []string{"no device was passed", "--device"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("deploy without a device: stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	a.must(0, "up", "rp2350", "demo", "hello", "3", "--target", "rp2350-arm", "--device", node)
	r = a.must(0, "exec", "rp2350-demo-hello-t3-arm", "--", "sh", "-c", `test -c "$STEM_DEVICE" && echo "$STEM_DEVICE"`)
	if strings.TrimSpace(r.stdout) != node {
		t.Fatalf("the named device is not in the container: %q", r.stdout)
	}
	// The other target's instance, started without --device, does not see it.
	a.must(0, "up", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv")
	a.must(1, "exec", "rp2350-demo-hello-t3-rv", "--", "test", "-e", node)
	// Both targets' example builds compile in the image.
	a.must(0, "build", "rp2350-demo-hello-t3-arm")
	a.must(0, "build", "rp2350-demo-hello-t3-rv")
}
