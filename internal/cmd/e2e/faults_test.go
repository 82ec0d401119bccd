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

// mcpCall calls a tool and returns its text and whether it was an error.
func mcpCall(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: protocol error (the server must answer with a tool error): %v", name, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// One MCP session, following the selection, lives through faults of a real
// instance: nvim killed inside the container and repaired by `stemctl up`,
// then the container removed behind stem's back and re-created. It refuses
// clearly while the instance is broken and serves the repaired instance —
// the new container, never the old one's sockets — without reconnecting.
func TestMCPSessionThroughInstanceFaults(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	a.must(0, "mcp", "select", inst)
	status := func() (id, dir string) {
		r := a.must(0, "status", inst, "--json")
		var st struct {
			Record struct {
				ContainerID string `json:"container_id"`
				SocketDir   string `json:"socket_dir"`
			} `json:"record"`
		}
		json.Unmarshal([]byte(r.Stdout), &st)
		return st.Record.ContainerID, st.Record.SocketDir
	}
	oldID, oldDir := status()

	c, err := client.NewStdioMCPClient(filepath.Join(bins(t), "stem-mcp"), a.Env, "serve", "--level", "observe")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-faults", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, c, "session_status", nil); isErr || !strings.Contains(out, oldID) {
		t.Fatalf("session_status: %v %s", isErr, out)
	}
	if _, isErr := mcpCall(t, c, "nvim_status", nil); isErr {
		t.Fatal("nvim_status failed on a healthy instance")
	}

	// nvim killed inside: a clear error, pane tools keep working.
	a.must(0, "exec", inst, "--", "pkill", "-x", "nvim")
	waitFor(t, 10*time.Second, "nvim_status to fail", func() bool { _, isErr := mcpCall(t, c, "nvim_status", nil); return isErr })
	if out, _ := mcpCall(t, c, "nvim_status", nil); !strings.Contains(out, "Neovim is not running in instance "+inst) || !strings.Contains(out, "stemctl up native-amd64 demo hello 1") {
		t.Fatalf("nvim error does not say what is wrong and what fixes it: %s", out)
	}
	if _, isErr := mcpCall(t, c, "pane_list", nil); isErr {
		t.Fatal("pane_list failed while only nvim was down")
	}
	// A session started while the editor is down (a new agent, the gate's
	// next connection) serves the terminal too, and the selection works.
	a.must(0, "mcp", "select", inst)
	if r := a.must(0, "mcp", "call", "--level", "observe", "pane_list"); !strings.Contains(r.Stdout, "%0") {
		t.Fatalf("a new session's pane_list with nvim down: %s", r.Stdout)
	}
	r := a.must(0, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stdout, "repaired") {
		t.Fatalf("up with nvim gone: %s", r.Stdout)
	}
	if id, _ := status(); id != oldID {
		t.Fatal("repairing nvim replaced the container")
	}
	if w := a.must(0, "exec", inst, "--", "tmux", "-S", filepath.Join(oldDir, "t.sock"), "list-windows", "-F", "#{window_name} #{pane_current_command}"); strings.Count(w.Stdout, "edit ") != 1 || !strings.Contains(w.Stdout, "edit nvim") {
		t.Fatalf("after the repair want one edit window running nvim: %q", w.Stdout)
	}
	waitFor(t, 10*time.Second, "nvim_status to work again", func() bool { _, isErr := mcpCall(t, c, "nvim_status", nil); return !isErr })

	// The container removed behind stem's back: refused, then re-created.
	if out, err := exec.Command("podman", "rm", "-f", oldID).CombinedOutput(); err != nil {
		t.Fatalf("podman rm: %v %s", err, out)
	}
	waitFor(t, 10*time.Second, "session_status to refuse", func() bool { _, isErr := mcpCall(t, c, "session_status", nil); return isErr })
	r = a.must(0, "up", "native-amd64", "demo", "hello", "1")
	if !strings.Contains(r.Stdout, "recreated") {
		t.Fatalf("up after podman rm: %s", r.Stdout)
	}
	newID, newDir := status()
	if newID == oldID || newDir == oldDir {
		t.Fatal("no new container")
	}
	var out string
	waitFor(t, 10*time.Second, "the session to serve the new container", func() bool {
		var isErr bool
		out, isErr = mcpCall(t, c, "session_status", nil)
		return !isErr && strings.Contains(out, newID)
	})
	if strings.Contains(out, oldID) {
		t.Fatalf("the session still names the old container: %s", out)
	}
	if _, isErr := mcpCall(t, c, "nvim_status", nil); isErr {
		t.Fatal("nvim_status failed on the re-created instance")
	}
}
