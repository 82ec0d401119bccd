package mcpserver

import (
	"testing"

	"github.com/stem-edu/stem/internal/mcpconfig"
)

// Every tool call ends (its own bound, or the default) within the time the
// entries stem writes ask the CLIs to wait: a CLI that gave up first would
// report a failure for a call that went on in the student's session.
func TestEveryCallEndsWithinTheCLIsTimeout(t *testing.T) {
	longest := defaultToolTimeout
	for _, d := range allTools() {
		if d.timeout > longest {
			longest = d.timeout
		}
		if d.timeout >= mcpconfig.ToolTimeout {
			t.Errorf("%s may run %v, not less than the %v the CLIs are asked to wait", d.tool.Name, d.timeout, mcpconfig.ToolTimeout)
		}
	}
	if defaultToolTimeout >= mcpconfig.ToolTimeout {
		t.Errorf("the default bound %v is not less than %v", defaultToolTimeout, mcpconfig.ToolTimeout)
	}
	t.Logf("the longest call: %v; the CLIs wait %v", longest, mcpconfig.ToolTimeout)
}
