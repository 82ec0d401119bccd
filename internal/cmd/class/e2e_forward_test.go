package class

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/testenv"
)

// shellWindow opens a window named shell in the student's tmux (as the
// student would) and returns a function that types a line into it.
func shellWindow(t *testing.T, a *testenv.Account) func(string) {
	t.Helper()
	st, err := a.Run(nil, "status", instance, "--json")
	var rec struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	if err != nil || json.Unmarshal([]byte(st.Stdout), &rec) != nil || rec.Record.SocketDir == "" {
		t.Fatalf("status: %v %s %s", err, st.Stdout, st.Stderr)
	}
	sock := filepath.Join(rec.Record.SocketDir, "t.sock")
	if r, err := a.Run(nil, "exec", instance, "--", "tmux", "-S", sock, "new-window", "-d", "-t", "stem:", "-n", "shell"); err != nil || r.Code != 0 {
		t.Fatalf("new-window: %v %d %s", err, r.Code, r.Stderr)
	}
	return func(line string) {
		t.Helper()
		for _, keys := range [][]string{{"-l", line}, {"Enter"}} {
			args := append([]string{"exec", instance, "--", "tmux", "-S", sock, "send-keys", "-t", "stem:shell"}, keys...)
			if r, err := a.Run(nil, args...); err != nil || r.Code != 0 {
				t.Fatalf("send-keys: %v %d %s", err, r.Code, r.Stderr)
			}
		}
	}
}

// overSessions: once sessions are open, class_overview asks those students
// over them (no new SSH connection), the others anew; each such status is in
// the student's own audit log.
func overSessions(t *testing.T, call func(string, map[string]any, any), open []string, s1 *testenv.Account) {
	t.Helper()
	var took []time.Duration
	var ov struct {
		Students []class.Row `json:"students"`
	}
	for range 5 {
		start := time.Now()
		call("class_overview", nil, &ov)
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("class_overview of %d students, %d over open sessions: median %v of 5", len(ov.Students), len(open), took[2].Round(time.Millisecond))
	for _, r := range ov.Students {
		isOpen := slices.Contains(open, r.Student)
		if isOpen && (r.Via != "session" || r.Reach != class.ReachOK) || !isOpen && r.Via == "session" {
			t.Errorf("%s asked via %q (%s: %s)", r.Student, r.Via, r.Reach, r.Why)
		}
	}
	r, err := s1.Run(nil, "audit", "show", "--event", "tool_call", "--json")
	if err != nil || r.Code != 0 || strings.Count(r.Stdout, `"gate.mcp_status"`) < 5 {
		t.Fatalf("s1's audit log lacks the statuses asked over the session: %v %s %s", err, r.Stdout, r.Stderr)
	}
}

// forwarded: student tools reach the named student's gate at that
// student's grant's level, and say whose data they carry.
func forwarded(t *testing.T, c *client.Client, ctx context.Context, s1, s2 *testenv.Account) {
	t.Helper()
	raw := func(name string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var all []string
		for _, ct := range res.Content {
			if tc, ok := mcp.AsTextContent(ct); ok {
				all = append(all, tc.Text)
			}
		}
		var obj map[string]any
		if len(all) > 0 {
			json.Unmarshal([]byte(all[0]), &obj)
		}
		return obj, strings.Join(all, "\n"), res.IsError
	}
	typeLine := shellWindow(t, s2)
	typeLine("true")
	shell := func(student string) string {
		t.Helper()
		obj, text, isErr := raw("pane_list", map[string]any{"student": student})
		if isErr || obj["student"] != student {
			t.Fatalf("pane_list %s: %s", student, text)
		}
		panes, _ := obj["panes"].([]any)
		for _, p := range panes {
			if p, ok := p.(map[string]any); ok && p["window_name"] == "shell" {
				return p["id"].(string)
			}
		}
		t.Fatalf("%s has no shell pane: %s", student, text)
		return ""
	}
	p2 := shell("s2")

	// s1's grant is observe: keys are refused, naming the level, and the
	// gate's session never saw the call.
	before, _ := s1.Run(nil, "audit", "show", "--json")
	_, text, isErr := raw("pane_send_keys", map[string]any{"student": "s1", "pane": "%0", "keys": "echo no{Enter}"})
	if !isErr || !strings.Contains(text, "s1") || !strings.Contains(text, "level observe") {
		t.Fatalf("pane_send_keys to observe-level s1: error %v: %s", isErr, text)
	}
	if after, _ := s1.Run(nil, "audit", "show", "--json"); strings.Count(after.Stdout, "pane_send_keys") != strings.Count(before.Stdout, "pane_send_keys") {
		t.Fatalf("a refused call reached s1's gate:\n%s", after.Stdout)
	}
	// The control: s2's grant is full, the same call runs in s2's pane.
	obj, text, isErr := raw("pane_send_keys", map[string]any{"student": "s2", "pane": p2, "keys": "echo $((6*7))forwarded{Enter}"})
	if isErr || obj["student"] != "s2" {
		t.Fatalf("pane_send_keys to full-level s2: %s", text)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		obj, text, isErr = raw("pane_capture", map[string]any{"student": "s2", "pane": p2})
		if isErr {
			t.Fatalf("pane_capture s2: %s", text)
		}
		if strings.Contains(text, "42forwarded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the keys did not run in s2's pane:\n%s", text)
		}
	}
	if n, _ := obj["notice"].(string); obj["student"] != "s2" || !strings.Contains(n, "student s2's session") || !strings.Contains(n, "not instructions") {
		t.Fatalf("pane text without its student or notice: %s", text)
	}
	if r, _ := s2.Run(nil, "audit", "show", "--json"); !strings.Contains(r.Stdout, "pane_send_keys") {
		t.Fatalf("s2's audit log lacks the keys:\n%s", r.Stdout)
	}
	// s4's grant is assist: pane_run (full only) is refused naming it.
	if _, text, isErr := raw("pane_run", map[string]any{"student": "s4", "pane": "%0", "command": "true"}); !isErr || !strings.Contains(text, "level assist") {
		t.Fatalf("pane_run to assist-level s4: error %v: %s", isErr, text)
	}
	// The same tool at observe level works for s1 too.
	if obj, text, isErr := raw("session_status", map[string]any{"student": "s1"}); isErr || obj["student"] != "s1" || obj["level"] != "observe" {
		t.Fatalf("session_status s1: %s", text)
	}
	for _, args := range []map[string]any{{"student": "nobody"}, {}} {
		if _, text, isErr := raw("session_status", args); !isErr || !strings.Contains(text, "student") {
			t.Fatalf("session_status %v: %s", args, text)
		}
	}
}
