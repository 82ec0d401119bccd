package mcpserver

import (
	"strings"
	"testing"
)

// The design contract: several MCP servers may serve one session and both
// can type, so there is no arbitration guarantee; the docs and the tool
// descriptions must say so. Every tool that changes the session (effect)
// says it in its description, and the server instructions say it at every
// level.
func TestDesignNoArbitrationIsStated(t *testing.T) {
	const note = "nothing arbitrates"
	for _, d := range allTools() {
		if !d.effect {
			continue
		}
		if !strings.Contains(d.tool.Description, note) {
			t.Errorf("%s changes the session but its description does not say that %s between clients:\n%s", d.tool.Name, note, d.tool.Description)
		}
	}
	for _, l := range []Level{Observe, Assist, Full} {
		if !strings.Contains(instructions(l), note) {
			t.Errorf("the server instructions at %v do not say that %s", l, note)
		}
	}
}
