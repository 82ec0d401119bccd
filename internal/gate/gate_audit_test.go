package gate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/registry"
)

// spoilers make the fixture's audit log impossible to append to, in ways
// that hold for root too (the tests run as root, so permissions do not).
var spoilers = map[string]func(t *testing.T, state string){
	"corrupt last line": func(t *testing.T, state string) {
		l, err := audit.Open(state)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), audit.Entry{Event: audit.Select, Account: "anna"}); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(l.Path(), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"seq":2,"event":"tool_ca`)
		f.Close()
	},
	"log is a directory": func(t *testing.T, state string) {
		if err := os.MkdirAll(filepath.Join(state, "audit.jsonl"), 0o700); err != nil {
			t.Fatal(err)
		}
	},
}

// oneRefusalLine checks the gate's stderr is one line of refusal that says
// the audit log cannot be written.
func oneRefusalLine(t *testing.T, what string, code int, errOut string, want ...string) {
	t.Helper()
	if code != ExitRefused {
		t.Errorf("%s: exit %d, want %d (refused); stderr %q", what, code, ExitRefused, errOut)
	}
	if !strings.HasPrefix(errOut, "stem-mcp gate: refused: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("%s: stderr is not one clear line: %q", what, errOut)
	}
	for _, w := range append(want, "cannot be written", "stemctl audit verify") {
		if !strings.Contains(errOut, w) {
			t.Errorf("%s: stderr does not say %q: %q", what, w, errOut)
		}
	}
}

// A refusal the audit log cannot take is still a refusal, with one line
// that says it was not recorded.
func TestRefusalWithUnwritableAuditLog(t *testing.T) {
	for name, spoil := range spoilers {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, access.Full, "hazard3-sim-inf-bss-t4")
			spoil(t, f.state)
			for _, cmd := range []string{"bash", "mcp other-instance", "mcp; id"} {
				rec := &recorder{}
				code, out, errOut := f.run(t, cmd, rec)
				if len(rec.calls) != 0 || out != "" {
					t.Errorf("%q: served %d, out %q", cmd, len(rec.calls), out)
				}
				oneRefusalLine(t, cmd, code, errOut, "not in the audit log")
			}
		})
	}
}

// An accepted request (mcp, status, list) whose audit entry cannot be
// written is refused: nothing is served or answered.
func TestAcceptedRequestRefusedWhenAuditLogUnwritable(t *testing.T) {
	for name, spoil := range spoilers {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, access.Assist, "live-t1")
			reg, err := registry.Open(f.state)
			if err != nil {
				t.Fatal(err)
			}
			sd := filepath.Join(f.runtime, "live-t1")
			os.MkdirAll(sd, 0o700)
			if err := reg.Put(context.Background(), registry.Record{Instance: "live-t1", Profile: "native-amd64", ContainerID: strings.Repeat("a", 64), SocketDir: sd}); err != nil {
				t.Fatal(err)
			}
			spoil(t, f.state)
			for _, c := range []struct{ cmd, what string }{
				{"mcp live-t1", "MCP session not served"},
				{"mcp", "MCP session not served"},
				{"status", "status not given"},
				{"list", "list not given"},
			} {
				rec := &recorder{}
				code, out, errOut := f.run(t, c.cmd, rec)
				if len(rec.calls) != 0 || out != "" {
					t.Errorf("%q: served %d, out %q", c.cmd, len(rec.calls), out)
				}
				oneRefusalLine(t, c.cmd, code, errOut, c.what)
			}
		})
	}
}

// When the MCP server itself refuses the session because its start cannot
// be audited, the gate reports a refusal in one line, not a failure.
func TestServerAuditRefusalIsARefusal(t *testing.T) {
	f := newFixture(t, access.Full)
	var errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("mcp"), ErrOut: &errOut,
		Serve: func(context.Context, ServeRequest) error {
			return fmt.Errorf("refusing to serve: %w", &audit.WriteError{Path: filepath.Join(f.state, "audit.jsonl"), Err: os.ErrPermission})
		},
	})
	oneRefusalLine(t, "mcp", code, errOut.String(), "MCP session not served")
}
