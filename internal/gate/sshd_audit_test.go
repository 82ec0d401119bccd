package gate_test

// Fail-closed auditing through the real sshd, gate and stem-mcp: with an
// audit log that cannot take an entry, every request of the automation key
// is refused with one line on stderr, and nothing is served.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/gate"
)

func TestSSHRefusedWhenAuditLogUnwritable(t *testing.T) {
	s := newStudent(t)
	key, _ := s.grant(t, "helper", "assist", "--instance", s.inst.Name)
	logPath := filepath.Join(s.inst.Dirs.State, "audit.jsonl")
	good, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":7,"event":"tool_ca` + "\n") // a whole line, not an entry
	f.Close()
	for _, c := range []struct {
		remote []string
		code   string
		want   string
	}{
		{[]string{"mcp", s.inst.Name}, "not_audited", "MCP session not served"},
		{[]string{"mcp"}, "not_audited", "MCP session not served"},
		{[]string{"status"}, "not_audited", "status not given"},
		{[]string{"list"}, "not_audited", "list not given"},
		{[]string{"bash"}, "bad_input", "this refusal is not in the audit log"},
	} {
		r := s.srv.Run(t, key.Private, nil, c.remote...)
		if r.Code != gate.ExitRefused || r.Stdout != "" || !strings.HasPrefix(r.Stderr, "stem-mcp gate: ["+c.code+"] refused: ") ||
			strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, c.want) ||
			!strings.Contains(r.Stderr, "cannot be written") || !strings.Contains(r.Stderr, "stemctl audit verify") {
			t.Errorf("ssh %q: code %d stdout %q stderr %q (want one refusal line with %q)", c.remote, r.Code, r.Stdout, r.Stderr, c.want)
		}
	}
	data, _ := os.ReadFile(logPath)
	if want := string(good) + `{"seq":7,"event":"tool_ca` + "\n"; string(data) != want {
		t.Errorf("the log changed: %q", strings.TrimPrefix(string(data), string(good)))
	}

	// The log is whole again but its head cannot be written: the gate's
	// check passes, the server's session_start fails, and the server's
	// refusal reaches the teacher as the gate's one refusal line.
	if err := os.WriteFile(logPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(s.inst.Dirs.State, "audit.head")
	os.Remove(head)
	if err := os.MkdirAll(filepath.Join(head, "x"), 0o700); err != nil { // a directory: it cannot be opened for writing
		t.Fatal(err)
	}
	r := s.srv.Run(t, key.Private, nil, "mcp", s.inst.Name)
	if r.Code != gate.ExitRefused || r.Stdout != "" || !strings.HasPrefix(r.Stderr, "stem-mcp gate: [not_audited] refused: MCP session not served: ") ||
		strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "audit.head") {
		t.Errorf("session_start not written: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}
