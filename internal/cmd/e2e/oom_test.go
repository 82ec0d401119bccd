package e2e_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// observeClient is an observe-level MCP session on the selection.
func observeClient(t *testing.T, a *account) *client.Client {
	t.Helper()
	c, err := client.NewStdioMCPClient(filepath.Join(bins(t), "stem-mcp"), a.Env, "serve", "--level", "observe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-oom", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// A program of the student's that runs out of memory in the container is
// killed there (the profile's 1 GiB limit), and only it: the session's
// tmux and Neovim live on, a call that was waiting on the pane when it
// happened still answers, and the tools keep working. Then the container
// is stopped under a waiting call: the call ends at once, saying the
// instance is down and how to start it, and `stemctl up` brings the
// session back for the same MCP session.
func TestOOMAndStopUnderARunningCall(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	a.must(0, "mcp", "select", inst)
	var st struct {
		Record struct {
			ContainerID string `json:"container_id"`
			SocketDir   string `json:"socket_dir"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	c := observeClient(t, a)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")
	a.tmuxOut(sock, "new-window", "-d", "-n", "shell")
	pane := strings.TrimSpace(a.tmuxOut(sock, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))

	// A wait in flight over the whole fault.
	type res struct {
		text  string
		isErr bool
		took  time.Duration
	}
	waitCall := func(pattern string) chan res {
		ch := make(chan res, 1)
		go func() {
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "pane_wait"
			req.Params.Arguments = map[string]any{"pane": pane, "pattern": pattern, "timeout_ms": 120000}
			r, err := c.CallTool(ctx, req)
			if err != nil {
				ch <- res{err.Error(), true, time.Since(t0)}
				return
			}
			var b strings.Builder
			for _, ct := range r.Content {
				if tc, ok := ct.(mcp.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			ch <- res{b.String(), r.IsError, time.Since(t0)}
		}()
		return ch
	}
	done := waitCall(`OOM-DONE-\d+`)
	// The hog: tail keeps all of its endless input in memory.
	r, err := a.run("exec", inst, "--tty", "never", "--", "sh", "-c", "head -c 4G /dev/zero | tail -n 1 >/dev/null; echo exit $?")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Stdout, "exit 137") {
		t.Fatalf("the hog was not killed by the OOM killer: %d %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if st := a.must(0, "status", inst, "--json"); !strings.Contains(st.Stdout, `"state": "running"`) {
		t.Fatalf("after the OOM kill: %s", st.Stdout)
	}
	for _, tool := range []string{"pane_list", "nvim_status", "session_status"} {
		if out, isErr := mcpCall(t, c, tool, nil); isErr {
			t.Fatalf("%s after the OOM kill: %s", tool, out)
		}
	}
	a.tmuxOut(sock, "send-keys", "-t", pane, "echo OOM-DONE-$((40+2))", "Enter")
	if got := <-done; got.isErr || !strings.Contains(got.text, "OOM-DONE-42") {
		t.Fatalf("the wait in flight during the OOM kill: %v %s", got.isErr, got.text)
	}

	// Stopped under a waiting call (or just before it: either way it
	// must end at once and say what to do).
	done = waitCall("never-printed-0e5b")
	if out, err := exec.Command("podman", "stop", "-t", "0", st.Record.ContainerID).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v %s", err, out)
	}
	got := <-done
	if !got.isErr || !strings.Contains(got.text, "stemctl up native-amd64 demo hello 1") {
		t.Fatalf("the wait under the stop: %v %s", got.isErr, got.text)
	}
	if got.took > time.Minute {
		t.Fatalf("the wait under the stop ended after %v, not when the container stopped", got.took)
	}
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	waitFor(t, 20*time.Second, "pane_list on the restarted instance", func() bool { _, isErr := mcpCall(t, c, "pane_list", nil); return !isErr })
}
