package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Podman API service SIGKILLed in the middle of work. Each test runs
// stemctl against a service of the account's own, on a socket in its
// runtime directory that stemctl starts when nothing answers there: the
// service everyone else uses is never touched. On the engine that only
// started a service when a command began, `up` failed ("create ...:
// connection refused") and `exec` blamed a service that "is not running:
// start it with systemctl", though stemctl had started it itself.

// servicePID is the pid of the account's own Podman service, 0 if none.
func (a *account) servicePID() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cl), "\x00system\x00service\x00") && strings.Contains(string(cl), a.Runtime+"/") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !zombie(st) {
				return pid
			}
		}
	}
	return 0
}

func zombie(stat []byte) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z")
}

// newServiceAccount is an account whose Podman service is its own, ended
// with the test.
func newServiceAccount(t *testing.T) *account {
	var a *account
	// Registered first, so it runs last: the account's clean-up may start
	// the service again.
	t.Cleanup(func() {
		if a == nil {
			return
		}
		if pid := a.servicePID(); pid != 0 {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	})
	a = newAccount(t)
	a.Env = append(a.Env, "CONTAINER_HOST=unix://"+filepath.Join(a.Runtime, "podman", "podman.sock"))
	return a
}

// killService SIGKILLs the account's service and waits until it is gone.
func (a *account) killService(t *testing.T) {
	t.Helper()
	pid := a.servicePID()
	if pid == 0 {
		t.Fatal("the account's Podman service is not running")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 30*time.Second, "the killed service to be gone", func() bool {
		st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err != nil || zombie(st)
	})
}

// runKilling runs stemctl with args and kills the account's service when
// a line of its output starts with at; it returns the output and the
// exit code.
func (a *account) runKilling(t *testing.T, at string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var said []string
	killed := false
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		said = append(said, sc.Text())
		if !killed && strings.HasPrefix(sc.Text(), at) {
			a.killService(t)
			killed = true
		}
	}
	cmd.Wait()
	pr.Close()
	out := strings.Join(said, "\n")
	if !killed {
		t.Fatalf("stemctl %v never said %q:\n%s", args, at, out)
	}
	return out, cmd.ProcessState.ExitCode()
}

// containersNamed lists the containers, whole or only in storage, whose
// name is the one of the account's instance inst.
func (a *account) containersNamed(t *testing.T, inst string) []string {
	t.Helper()
	var st struct {
		Record struct {
			ContainerID string `json:"container_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	podman := func(args ...string) string {
		cmd := exec.Command("podman", args...)
		cmd.Env = localPodmanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("podman %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	name := podman("inspect", "--format", "{{.Name}}", st.Record.ContainerID)
	var same []string
	for _, l := range strings.Split(podman("ps", "-a", "--external", "--format", "{{.ID}} {{.Names}} {{.State}}"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == name {
			same = append(same, l)
		}
	}
	return same
}

// localPodmanEnv: the podman CLI reading the store itself, not a client of
// a service.
func localPodmanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONTAINER_HOST=") {
			env = append(env, kv)
		}
	}
	return env
}

// The service killed while `stemctl up` creates the container: stemctl
// starts it again and the instance is made, once.
func TestServiceKilledDuringUp(t *testing.T) {
	a := newServiceAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	out, code := a.runKilling(t, "creating ", "up", "native-amd64", "demo", "hello", "1")
	t.Logf("up, the service killed while creating: exit %d\n%s", code, out)
	if code != 0 {
		t.Fatalf("up failed when its Podman service was killed under it:\n%s", out)
	}
	if a.servicePID() == 0 {
		t.Fatal("no service runs after up: stemctl did not start it again")
	}
	st := a.must(0, "status", inst, "--json")
	if !strings.Contains(st.Stdout, `"state": "running"`) {
		t.Fatalf("status after up: %s", st.Stdout)
	}
	if got := a.containersNamed(t, inst); len(got) != 1 {
		t.Fatalf("want exactly one container named as %s's, Podman has: %v", inst, got)
	}
	if r := a.must(0, "exec", inst, "--tty", "never", "--", "echo", "works"); strings.TrimSpace(r.Stdout) != "works" {
		t.Fatalf("exec after up: %q", r.Stdout)
	}
}

// The service killed while `stemctl exec` runs a command: the stream ends
// with it, and exec says so — the output from then on is lost, the service
// was started again, the command runs on — instead of reporting the
// end of the stream as the command's. The next exec works.
func TestServiceKilledDuringExec(t *testing.T) {
	a := newServiceAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	out, code := a.runKilling(t, "running", "exec", inst, "--tty", "never", "--", "sh", "-c", "echo running; sleep 60; echo finished")
	t.Logf("exec, the service killed while it ran: exit %d\n%s", code, out)
	if code == 0 || strings.Contains(out, "finished") {
		t.Fatalf("exec reported success though its stream was cut: %d\n%s", code, out)
	}
	for _, w := range []string{"stopped while the command ran", "output from then on is lost", "stem started the service again"} {
		if !strings.Contains(out, w) {
			t.Errorf("exec's error does not say %q:\n%s", w, out)
		}
	}
	// The service may die before it records the start; then it cannot
	// know, and exec must not claim an end.
	if !strings.Contains(out, "still runs") && !strings.Contains(out, "may still be running") {
		t.Errorf("exec's error does not say the command runs on:\n%s", out)
	}
	if strings.Contains(out, "has ended") {
		t.Errorf("exec says a command that sleeps 60 s has ended:\n%s", out)
	}
	if strings.Contains(out, "systemctl") {
		t.Errorf("exec tells the user to start a service that stemctl started itself:\n%s", out)
	}
	if r := a.must(0, "exec", inst, "--tty", "never", "--", "echo", "again"); strings.TrimSpace(r.Stdout) != "again" {
		t.Fatalf("exec after the kill: %q", r.Stdout)
	}
}

// The service killed under a running stem-mcp: its tool calls need no
// Podman while the container's first process is the one it verified, so
// they keep working with the service dead — a wait in flight included —
// and after stemctl starts it again. A stem-mcp started while the service
// is dead verifies the container through the podman CLI instead.
func TestServiceKilledUnderMCP(t *testing.T) {
	a := newServiceAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	a.must(0, "mcp", "select", inst)
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	c := observeClient(t, a)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")
	a.tmuxOut(sock, "new-window", "-d", "-n", "shell")
	pane := strings.TrimSpace(a.tmuxOut(sock, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	tools := []string{"pane_list", "nvim_status", "session_status"}
	for _, tool := range tools {
		if out, isErr := mcpCall(t, c, tool, nil); isErr {
			t.Fatalf("%s before the kill: %s", tool, out)
		}
	}
	type res struct {
		text  string
		isErr bool
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "pane_wait"
		req.Params.Arguments = map[string]any{"pane": pane, "pattern": `SVC-BACK-\d+`, "timeout_ms": 120000}
		r, err := c.CallTool(ctx, req)
		if err != nil {
			done <- res{err.Error(), true}
			return
		}
		var b strings.Builder
		for _, ct := range r.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		done <- res{b.String(), r.IsError}
	}()

	a.killService(t)
	for _, tool := range tools {
		if out, isErr := mcpCall(t, c, tool, nil); isErr {
			t.Errorf("%s with the service dead: %s", tool, out)
		}
	}
	if out, isErr := mcpCall(t, c, "pane_capture", map[string]any{"pane": pane}); isErr {
		t.Errorf("pane_capture with the service dead: %s", out)
	}
	fresh := observeClient(t, a)
	if out, isErr := mcpCall(t, fresh, "pane_list", nil); isErr {
		t.Errorf("pane_list of a stem-mcp started with the service dead: %s", out)
	}
	a.tmuxOut(sock, "send-keys", "-t", pane, "echo SVC-BACK-$((40+2))", "Enter")
	if got := <-done; got.isErr || !strings.Contains(got.text, "SVC-BACK-42") {
		t.Fatalf("the wait in flight when the service was killed: %v %s", got.isErr, got.text)
	}

	a.must(0, "list")
	if a.servicePID() == 0 {
		t.Fatal("stemctl did not start the service again")
	}
	for _, tool := range tools {
		if out, isErr := mcpCall(t, c, tool, nil); isErr {
			t.Errorf("%s after the service was started again: %s", tool, out)
		}
	}
}
