package gate_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The task's agent policy caps the teacher's server too: a full grant
// through the real sshd gets only what an exam policy leaves, and the
// same calls work once the policy is gone (the control).
func TestSSHGateHonoursTheAgentPolicy(t *testing.T) {
	s := newStudent(t)
	key, _ := s.grant(t, "teacher", "full", "--instance", s.inst.Name)
	shell := s.shellPane(t)

	session := func(t *testing.T) (*client.Client, context.Context) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		c, _, err := s.mcpClient(t, ctx, key.Private, "mcp", s.inst.Name)
		if err != nil {
			t.Fatalf("initialize over ssh: %v\nsshd log:\n%s", err, s.srv.Log())
		}
		t.Cleanup(func() { c.Close() })
		return c, ctx
	}
	tools := func(t *testing.T, c *client.Client, ctx context.Context) []string {
		res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return slices.Compact(names)
	}
	call := func(c *client.Client, ctx context.Context, name string, args map[string]any) (string, bool) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		r, err := c.CallTool(ctx, req)
		if err != nil {
			return err.Error(), false
		}
		text, _ := json.Marshal(r.Content)
		return string(text), !r.IsError
	}
	keys := map[string]any{"pane": shell, "keys": "echo gate-$((6*7)){Enter}"}

	for _, tc := range []struct {
		name, table string
		want        []string
		keysWork    bool
		captureWork bool
	}{
		// gate_status is the grant's own status verb as a tool: every
		// gate session has it, whatever the task's policy.
		{"no policy (control)", "", withGateStatus(s.levelTools(t, "full")), true, true},
		{"exam observe", `max_level = "observe"`, withGateStatus(s.levelTools(t, "observe")), false, true},
		{"exam none", `max_level = "none"`, []string{"gate_status", "task_info"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.inst.SetAgentPolicy(t, tc.table)
			c, ctx := session(t)
			if got := tools(t, c, ctx); !slices.Equal(got, tc.want) {
				t.Fatalf("tools through the gate\n got %v\nwant %v", got, tc.want)
			}
			if text, ok := call(c, ctx, "pane_send_keys", keys); ok != tc.keysWork {
				t.Fatalf("pane_send_keys worked = %v, want %v: %s", ok, tc.keysWork, text)
			}
			for deadline := time.Now().Add(10 * time.Second); tc.keysWork; {
				if strings.Contains(s.inst.Tmux(t, "capture-pane", "-p", "-t", shell), "gate-42") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the control's keys never ran in the shell")
				}
				time.Sleep(20 * time.Millisecond) // polling a condition, not a fixed wait
			}
			if text, ok := call(c, ctx, "pane_capture", map[string]any{"pane": shell}); ok != tc.captureWork {
				t.Fatalf("pane_capture worked = %v, want %v: %s", ok, tc.captureWork, text)
			}
			text, ok := call(c, ctx, "task_info", nil)
			if !ok || !strings.Contains(text, `max_level`) {
				t.Fatalf("task_info: %s", text)
			}
			if tc.table != "" && !strings.Contains(text, strings.Split(tc.table, `"`)[1]) {
				t.Fatalf("task_info does not state the policy %s: %.600s", tc.table, text)
			}
		})
	}
	// Only the control typed: the capped sessions' keys never arrived.
	out := s.inst.Tmux(t, "capture-pane", "-p", "-J", "-t", shell, "-S", "-", "-E", "-")
	if n := strings.Count(out, "gate-42"); n != 1 {
		t.Fatalf("the shell shows the control's output %d times, want once:\n%s", n, out)
	}
}

// withGateStatus adds the gate's own tool to a level's sorted tool list.
func withGateStatus(tools []string) []string {
	out := append([]string{"gate_status"}, tools...)
	slices.Sort(out)
	return out
}
