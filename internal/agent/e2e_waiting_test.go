package agent_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// When the CLI asks its user something, agent list (and --json) and the
// agent's window name say so, and stop saying it once answered. Gemini
// CLI asks before running a shell command of its own.
func TestAgentListSaysWhenTheCLIWaits(t *testing.T) {
	t.Parallel() // its own account and model
	b := newBoxAccount(t, modelserver.Call("run_shell_command", map[string]any{"command": "rm -rf /tmp/stem-nothing", "description": "remove a file"}), modelserver.Say("stem-listed"))
	rec := b.start("gemini")
	st := b.status(nativeInst)
	b.prompt(st, rec, "list the panes")
	waiting := b.waitWaiting(st, rec, func(w string) bool { return w != "" })
	if out := b.must("agent", "list"); !strings.Contains(out, "WAITS FOR YOU: "+waiting) {
		t.Errorf("agent list does not say it waits:\n%s", out)
	}
	if name := b.tmux(st, "display-message", "-p", "-t", rec.Pane, "#{window_name}"); !strings.Contains(name, "waits for you") {
		t.Errorf("window name %q", name)
	}
	// The student allows the call (the first choice is selected).
	b.tmux(st, "send-keys", "-t", rec.Pane, "Enter")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.ms.WaitResult(ctx, 0); err != nil {
		t.Fatalf("no result after allowing: %v\n%s", err, b.capture(st, rec.Pane))
	}
	b.waitWaiting(st, rec, func(w string) bool { return w == "" })
	if name := strings.TrimSpace(b.tmux(st, "display-message", "-p", "-t", rec.Pane, "#{window_name}")); name != rec.Provider {
		t.Errorf("window name %q after the answer", name)
	}
}

// waitWaiting polls agent list --json until the agent's waiting state
// satisfies ok, and returns it.
func (b *boxAccount) waitWaiting(st instanceInfo, rec agentstore.Record, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sts []agentstore.Status // fresh: Unmarshal keeps fields the JSON omits
		b.mustJSON(&sts, "agent", "list", "--json")
		for _, s := range sts {
			if s.ID == rec.ID && ok(s.Waiting) {
				return s.Waiting
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("agent list --json never showed the waiting state wanted: %+v\nits window:\n%s\nlog:\n%s\nstate: %s", sts, b.capture(st, rec.Pane), readFile(rec.Log), readFile(filepath.Join(rec.Dir, agentstore.StateFile)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
