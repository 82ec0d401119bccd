package mcpserver_test

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
)

// The in-process twins of TestToolListsPerLevel: the same lists, seen by
// an MCP client of a server on fakes, in milliseconds.
func TestInProcessToolListsPerLevel(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"observe", "assist", "full"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			l, _ := levels.Parse(level)
			h := mcptest.New(t, mcptest.Options{Level: l})
			got := h.Tools()
			sort.Strings(got)
			if !reflect.DeepEqual(got, wantTools[level]) {
				t.Fatalf("tools at %s:\n got %v\nwant %v", level, got, wantTools[level])
			}
			names := mcpserver.ToolNames(l)
			sort.Strings(names)
			if !reflect.DeepEqual(names, got) {
				t.Fatalf("ToolNames(%s) %v differs from what the server lists %v", level, names, got)
			}
			if level != "full" {
				for _, ft := range freeText {
					if slices.Contains(got, ft) {
						t.Fatalf("%s exposes free-text tool %s", level, ft)
					}
				}
			}
		})
	}
}

// A tool of a higher level does not exist below it: calling it by name is
// refused as an unknown tool, and nothing reaches the session. Control:
// the same call at full runs and reaches the fake.
func TestInProcessHigherToolsAreAbsent(t *testing.T) {
	t.Parallel()
	calls := []struct {
		tool string
		args map[string]any
		sent func(h *mcptest.Harness) int
	}{
		{"pane_run", map[string]any{"pane": "%1", "command": "id"}, func(h *mcptest.Harness) int { return len(h.Tmux.Runs()) }},
		{"nvim_command", map[string]any{"command": "qa!"}, func(h *mcptest.Harness) int { ex, _ := h.Nvim.Commands(); return len(ex) }},
		{"nvim_lua", map[string]any{"code": "return 1"}, func(h *mcptest.Harness) int { _, lua := h.Nvim.Commands(); return len(lua) }},
		{"gdb_command", map[string]any{"command": "info frame"}, func(h *mcptest.Harness) int { return len(h.GDB.Sent()) }},
	}
	for _, l := range []mcpserver.Level{mcpserver.Observe, mcpserver.Assist} {
		h := mcptest.New(t, mcptest.Options{Level: l})
		h.GDB.Start()
		for _, c := range calls {
			if _, err := h.CallErr(c.tool, c.args); err == nil {
				t.Errorf("%s at %s: no protocol error", c.tool, l)
			}
			if n := c.sent(h); n != 0 {
				t.Errorf("%s at %s reached the session (%d)", c.tool, l, n)
			}
		}
	}
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Full})
	h.GDB.Start()
	for _, c := range calls {
		if r := h.Call(c.tool, c.args); r.IsError {
			t.Errorf("control: %s at full: %s", c.tool, r.Text)
		}
		if n := c.sent(h); n != 1 {
			t.Errorf("control: %s at full sent %d, want 1", c.tool, n)
		}
	}
}

// A gate-served session has gate_status at every level, answering with the
// gate's status; a session the gate does not serve has no such tool (the
// control: the same level without the gate).
func TestInProcessGateStatusAtEveryLevel(t *testing.T) {
	t.Parallel()
	for _, l := range []mcpserver.Level{mcpserver.Observe, mcpserver.Assist, mcpserver.Full} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			status := func(context.Context) (any, error) { return map[string]any{"grant": "g-" + l.String()}, nil }
			h := mcptest.New(t, mcptest.Options{Level: l, GateStatus: status})
			if !slices.Contains(h.Tools(), mcpserver.GateStatusTool) {
				t.Fatalf("%s: no %s in %v", l, mcpserver.GateStatusTool, h.Tools())
			}
			if r := h.Call(mcpserver.GateStatusTool, nil); r.IsError || r.Fields["grant"] != "g-"+l.String() {
				t.Fatalf("%s: %s answered %+v", l, mcpserver.GateStatusTool, r)
			}
			plain := mcptest.New(t, mcptest.Options{Level: l})
			if slices.Contains(plain.Tools(), mcpserver.GateStatusTool) {
				t.Fatalf("%s: %s without a gate", l, mcpserver.GateStatusTool)
			}
			if _, err := plain.CallErr(mcpserver.GateStatusTool, nil); err == nil {
				t.Fatalf("%s: %s called without a gate", l, mcpserver.GateStatusTool)
			}
		})
	}
}
