package gate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
)

// stemClients are the names of stem's control clients of the instance's tmux.
func (s *student) stemClients(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, n := range strings.Fields(s.inst.Tmux(t, "list-clients", "-F", "#{client_name}")) {
		if strings.HasPrefix(n, "stem-") {
			out = append(out, n)
		}
	}
	return out
}

// The teacher's SSH connection drops while a call is in flight: the gate
// ends its session (session_end in the audit log), its tmux control client
// leaves the student's server, the server lives on and the next teacher
// session works.
func TestSSHDroppedMidCallEndsTheSession(t *testing.T) {
	s := newStudent(t)
	key, _ := s.grant(t, "teacher", "observe", "--instance", s.inst.Name)
	if n := s.stemClients(t); len(n) != 0 {
		t.Fatalf("stem clients before the session: %v", n)
	}
	started := time.Now()
	ssh := exec.Command("ssh", s.srv.Args(key.Private, nil, "mcp", s.inst.Name)...)
	in, err := ssh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ssh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ssh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ssh.Process.Kill(); ssh.Wait() })
	send := func(v string) {
		if _, err := fmt.Fprintln(in, v); err != nil {
			t.Fatalf("write to ssh: %v", err)
		}
	}
	replies := bufio.NewScanner(out)
	replies.Buffer(nil, 1<<20)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + mcp.LATEST_PROTOCOL_VERSION + `","capabilities":{},"clientInfo":{"name":"drop","version":"1"}}}`)
	if !replies.Scan() || !strings.Contains(replies.Text(), `"id":1`) {
		t.Fatalf("initialize over ssh: %q %v\nsshd log:\n%s", replies.Text(), replies.Err(), s.srv.Log())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// A capture first: its answer shows the session holds its tmux client.
	pane := s.shellPane(t)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"` + pane + `"}}}`)
	if !replies.Scan() || !strings.Contains(replies.Text(), `"id":2`) {
		t.Fatalf("pane_capture over ssh: %q", replies.Text())
	}
	held := s.stemClients(t)
	if len(held) != 1 {
		t.Fatalf("the gate's session holds %v, want one stem control client", held)
	}
	// In flight: a wait for text that never comes, for a minute.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pane_wait","arguments":{"pane":"` + pane + `","pattern":"never-printed-6f1d","timeout_ms":60000}}}`)

	// The connection drops: the teacher's ssh is gone at once.
	ssh.Process.Kill()
	ssh.Wait()

	// Bounded by the wait above: a session that lived on would hold its
	// client until the call's minute is over.
	deadline := time.Now().Add(30 * time.Second)
	for len(s.stemClients(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := s.stemClients(t); len(left) > 0 {
		t.Fatalf("30 s after the connection dropped the gate still holds tmux client(s) %v\nsshd log:\n%s", left, s.srv.Log())
	}
	var ends []audit.Entry
	for time.Now().Before(deadline) {
		ends, err = s.auditLog(t).Read(audit.Filter{Event: audit.SessionEnd, Since: started})
		if err != nil {
			t.Fatal(err)
		}
		if len(ends) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ends) != 1 {
		t.Fatalf("session_end entries after the drop: %+v\nsshd log:\n%s", ends, s.srv.Log())
	}
	if res, err := s.auditLog(t).Verify(); err != nil || !res.OK {
		t.Fatalf("audit verify after the drop: %+v %v", res, err)
	}

	// Still works: the student's tmux and a new teacher session.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := s.mcpClient(t, ctx, key.Private, "mcp", s.inst.Name)
	if err != nil {
		t.Fatalf("a new session after the drop: %v", err)
	}
	defer c.Close()
	call := mcp.CallToolRequest{}
	call.Params.Name = "pane_capture"
	call.Params.Arguments = map[string]any{"pane": pane}
	if r, err := c.CallTool(ctx, call); err != nil || r.IsError {
		b, _ := json.Marshal(r)
		t.Fatalf("pane_capture after the drop: %v %s", err, b)
	}
}
