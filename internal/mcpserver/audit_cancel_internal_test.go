package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/testenv"
)

func auditEntries(t *testing.T, state string) []audit.Entry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line: %v", err)
		}
		out = append(out, e)
	}
	return out
}

// A call cancelled while it runs (the client went away, the server is
// shutting down) still gets its outcome line, even when another process
// holds the audit lock at that moment: the outcome is written under a
// context of its own, not the call's cancelled one.
func TestCancelledCallStillGetsItsOutcome(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(in.Tmux(t, "capture-pane", "-p", "-t", pane), "student$") {
		if time.Now().After(deadline) {
			t.Fatal("no prompt in the shell pane")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, _ := inProcess(t, in, Full, programs{})
	var def toolDef
	for _, d := range allTools() {
		if d.tool.Name == "pane_run" && d.at(Full) {
			def = d
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "pane_run"
	req.Params.Arguments = map[string]any{"pane": pane, "command": "sleep 30", "timeout_ms": float64(60000)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := s.call(ctx, []toolDef{def}, req)
		done <- res
	}()

	// The intent is written before the command is typed.
	var intent audit.Entry
	for deadline := time.Now().Add(20 * time.Second); intent.Seq == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no tool_intent for pane_run")
		}
		for _, e := range auditEntries(t, in.Dirs.State) {
			if e.Event == audit.ToolIntent && e.Tool == "pane_run" {
				intent = e
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(in.Tmux(t, "capture-pane", "-p", "-t", pane), "sleep 30"); time.Sleep(20 * time.Millisecond) {
		select {
		case res := <-done:
			t.Fatalf("pane_run ended before it was cancelled: %+v", res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane_run did not type its command:\n%s", in.Tmux(t, "capture-pane", "-p", "-t", pane))
		}
	}
	// Another process (a second stem-mcp, stemctl) holds the lock while
	// the call is cancelled.
	unlock, err := filelock.Lock(context.Background(), filepath.Join(in.Dirs.State, "audit.lock"), filelock.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	var res *mcp.CallToolResult
	select {
	case res = <-done:
		unlock()
		t.Fatal("the cancelled call returned while the audit lock was held: its outcome cannot have been written")
	case <-time.After(700 * time.Millisecond):
	}
	unlock()
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	if res == nil || !res.IsError {
		t.Fatalf("cancelled pane_run: %+v", res)
	}
	var outcome audit.Entry
	for _, e := range auditEntries(t, in.Dirs.State) {
		if e.Intent == intent.Seq {
			outcome = e
		}
	}
	if outcome.Seq == 0 || outcome.Event != audit.ToolCall || outcome.Result != "error" || outcome.Tool != "pane_run" || outcome.Duration == "" ||
		outcome.ArgsDigest != intent.ArgsDigest || outcome.Instance != in.Name || outcome.ContainerID != in.Record.ContainerID {
		t.Fatalf("outcome of the cancelled call: %+v (intent %+v)", outcome, intent)
	}
	in.Tmux(t, "send-keys", "-t", pane, "C-c")
}
