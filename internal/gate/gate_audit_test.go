package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/levels"
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
		f.WriteString(`{"seq":2,"event":"tool_ca` + "\n") // a whole line, not an entry
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
func oneRefusalLine(t *testing.T, what string, code int, errOut string, errCode errcode.Code, want ...string) {
	t.Helper()
	if code != ExitRefused {
		t.Errorf("%s: exit %d, want %d (refused); stderr %q", what, code, ExitRefused, errOut)
	}
	if !strings.HasPrefix(errOut, "stem-mcp gate: "+errcode.Tag(errCode)+"refused: ") || strings.Count(errOut, "\n") != 1 {
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
			f := newFixture(t, levels.Full.String(), "hazard3-sim-inf-bss-t4")
			spoil(t, f.state)
			for _, cmd := range []string{"bash", "mcp other-instance", "mcp; id"} {
				rec := &recorder{}
				code, out, errOut := f.run(t, cmd, rec)
				if len(rec.calls) != 0 || out != "" {
					t.Errorf("%q: served %d, out %q", cmd, len(rec.calls), out)
				}
				// The code is the refusal's; the line adds that it was not recorded.
				want := errcode.BadInput
				if cmd == "mcp other-instance" {
					want = errcode.NotGranted
				}
				oneRefusalLine(t, cmd, code, errOut, want, "not in the audit log")
			}
		})
	}
}

// An accepted request (mcp, status, list) whose audit entry cannot be
// written is refused: nothing is served or answered.
func TestAcceptedRequestRefusedWhenAuditLogUnwritable(t *testing.T) {
	for name, spoil := range spoilers {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, levels.Assist.String(), "live-t1")
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
				oneRefusalLine(t, c.cmd, code, errOut, errcode.NotAudited, c.what)
			}
		})
	}
}

// When the MCP server itself refuses the session because its start cannot
// be audited, the gate reports a refusal in one line, not a failure.
func TestServerAuditRefusalIsARefusal(t *testing.T) {
	f := newFixture(t, levels.Full.String())
	var errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("mcp"), ErrOut: &errOut,
		Serve: func(context.Context, ServeRequest) error {
			return fmt.Errorf("refusing to serve: %w", &audit.WriteError{Path: filepath.Join(f.state, "audit.jsonl"), Err: os.ErrPermission})
		},
	})
	oneRefusalLine(t, "mcp", code, errOut.String(), errcode.NotAudited, "MCP session not served")
}

// The MCP session's status is the status verb's answer for the same grant,
// each call audited on the student's side; and a status that cannot be
// audited is not given.
func TestSessionStatusIsTheVerbsAndAudited(t *testing.T) {
	f := newFixture(t, levels.Observe.String(), "live-t1")
	var got Status
	var calls int
	serve := func(ctx context.Context, req ServeRequest) error {
		for range 2 {
			st, err := req.Status(ctx)
			if err != nil {
				return err
			}
			got, calls = st, calls+1
		}
		return nil
	}
	var errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("mcp live-t1"), ErrOut: &errOut, Serve: serve,
	})
	if code != 0 || calls != 2 {
		t.Fatalf("mcp: exit %d, %d calls: %s", code, calls, errOut.String())
	}
	_, out, _ := f.run(t, "status", &recorder{})
	var verb Status
	if err := json.Unmarshal([]byte(out), &verb); err != nil {
		t.Fatal(err)
	}
	if got.Level != levels.Observe.String() || got.Grant != "kowalski" || fmt.Sprint(got) != fmt.Sprint(verb) {
		t.Fatalf("session status %+v, verb %+v", got, verb)
	}
	log, _ := audit.Open(f.state)
	entries, _ := log.Read(audit.Filter{Event: audit.ToolCall})
	n := 0
	for _, e := range entries {
		if e.Tool == "gate.mcp_status" && e.Level == levels.Observe.String() && e.Grant == f.grant.Label() {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("audit has %d gate.mcp_status entries, want 2: %+v", n, entries)
	}

	// The log breaks while the session is open.
	Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("mcp live-t1"), ErrOut: &errOut, Serve: func(ctx context.Context, req ServeRequest) error {
			lf, err := os.OpenFile(log.Path(), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			lf.WriteString(`{"seq":99,"event":"tool_ca` + "\n") // a whole line, not an entry
			lf.Close()
			if _, err := req.Status(ctx); err == nil || !strings.Contains(err.Error(), "status not given") {
				t.Errorf("status with an unwritable audit log: %v", err)
			}
			return nil
		},
	})
}
