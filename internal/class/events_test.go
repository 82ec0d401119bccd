package class

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// fakeGate is the stand-in ssh's `mcp INSTANCE`: an MCP server with
// session_events (host ok), a line that never ends (flood), or nothing
// at all (drop).
func fakeGate(host string) int {
	switch host {
	case "flood":
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 1
			}
		}
	case "drop":
		os.Stderr.WriteString("stem-mcp gate: [revoked] refused: grant g0 does not exist (revoked?)\n")
		return 1
	}
	s := server.NewMCPServer("fake-gate", "1")
	s.AddTool(mcp.NewTool("session_events", mcp.WithNumber("since"), mcp.WithNumber("wait_ms")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.GetFloat("since", 0) == 0 {
				return mcp.NewToolResultText(`{"events":[` +
					`{"seq":1,"type":"program_crashed","time":"2026-12-02T10:00:00Z","instance":"native-amd64-demo-hello-t1","pane":"%1","exit_code":139,"signal":"SIGSEGV\u001b]0;pwned\u0007"},` +
					`{"seq":2,"type":"gdb_stopped","time":"2026-12-02T10:00:01Z","instance":"native-amd64-demo-hello-t1","gdb":{"reason":"breakpoint-hit","line":"12","frame":{"x":1}}}]}`), nil
			}
			select { // the gate's own wait for the next event
			case <-ctx.Done():
			case <-time.After(time.Duration(req.GetFloat("wait_ms", 0)) * time.Millisecond):
			}
			return mcp.NewToolResultText(`{"events":[]}`), nil
		})
	if err := server.ServeStdio(s); err != nil {
		return 1
	}
	return 0
}

// The hub keeps a session per student and merges their events, each
// named; a gate that floods or drops the session is bounded, shown, and
// retried without touching the others.
func TestHubMergesAndSurvivesBadGates(t *testing.T) {
	opt := fakeOptions(t, 5*time.Second)
	ss := []Student{{Name: "ok", Host: "anna@ok"}, {Name: "flood", Host: "anna@flood"}, {Name: "drop", Host: "anna@drop"}}
	h := NewHub(ss, HubOptions{Options: opt, Poll: 200 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var evs []Event
	for deadline := time.Now().Add(30 * time.Second); len(evs) < 2; {
		evs = append(evs, h.Since(ctx, int64(len(evs)), time.Until(deadline))...)
		if time.Now().After(deadline) {
			t.Fatalf("events: %+v\nlinks: %+v", evs, h.Links())
		}
	}
	crash, stop := evs[0], evs[1]
	if crash.Student != "ok" || crash.Seq != 1 || crash.StudentSeq != 1 || crash.Type != "program_crashed" || crash.Signal != "SIGSEGV" ||
		crash.ExitCode == nil || *crash.ExitCode != 139 {
		t.Fatalf("crash: %+v", crash)
	}
	if stop.Seq != 2 || stop.GDB["reason"] != "breakpoint-hit" || stop.GDB["line"] != "12" || len(stop.GDB) != 2 {
		t.Fatalf("gdb stop: %+v", stop)
	}
	// A later call starts from where the client got to.
	if more := h.Since(ctx, 2, 0); len(more) != 0 {
		t.Fatalf("events repeated: %+v", more)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l := map[string]Link{}
		for _, x := range h.Links() {
			l[x.Student] = x
		}
		if l["ok"].Connected && l["ok"].Instance == "native-amd64-demo-hello-t1" &&
			strings.Contains(l["flood"].Error, "longer than 1 MiB") && l["flood"].Retry != nil &&
			strings.Contains(l["drop"].Error, "revoked") && !l["drop"].Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("links: %+v", l)
		}
	}
}
