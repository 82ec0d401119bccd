package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// Each real CLI, started by `stemctl agent start` in its sandbox, offers
// the model stem's tools of the agent's level, and the model's scripted
// call reaches stem-mcp on the host and comes back with the student's
// session in it.
func TestSandboxedCLIsReachStem(t *testing.T) {
	t.Parallel() // its own account and model
	for _, provider := range []string{"claude", "codex", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			b := newBoxAccount(t, modelserver.Call("pane_list", nil), modelserver.Say("stem-sandbox-done"))
			rec := b.start(provider)
			st := b.status(nativeInst)
			if rec.Sandbox == "" || rec.Mode != "window" {
				t.Fatalf("record %+v", rec)
			}
			req := b.prompt(st, rec, "list the panes")
			var stem []string
			for _, tool := range mcpserver.ToolNames(mcpserver.Assist) {
				if req.HasTool(tool) {
					stem = append(stem, tool)
				}
			}
			if len(stem) != len(mcpserver.ToolNames(mcpserver.Assist)) {
				t.Errorf("%s offered the model %d of stem's %d assist tools: %v", provider, len(stem), len(mcpserver.ToolNames(mcpserver.Assist)), req.Tools)
			}
			for _, tool := range mcpserver.ToolNames(mcpserver.Full) {
				if !slices.Contains(mcpserver.ToolNames(mcpserver.Assist), tool) && req.HasTool(tool) {
					t.Errorf("%s offered the full-level tool %s at assist", provider, tool)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := b.ms.WaitResult(ctx, 0)
			if err != nil {
				t.Fatalf("no result of pane_list came back: %v\nwindow:\n%s\nlog:\n%s", err, b.capture(st, rec.Pane), readFile(rec.Log))
			}
			// The student's session: its edit window and the agent's own.
			if !strings.Contains(res.Content, "edit") || !strings.Contains(res.Content, rec.Provider) {
				t.Errorf("pane_list result from the sandbox: %s", res.Content)
			}
		})
	}
}
