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
	// knownMissing are effectful tools whose description lacks the note (a
	// gap reported by the design audit). Remove a name when its description
	// gets the note; the test fails while a listed tool already has it.
	knownMissing := map[string]bool{"nvim_hint": true}
	seen := map[string]bool{}
	for _, d := range allTools() {
		if !d.effect {
			continue
		}
		name := d.tool.Name
		seen[name] = true
		has := strings.Contains(d.tool.Description, note)
		switch {
		case !has && !knownMissing[name]:
			t.Errorf("%s changes the session but its description does not say that %s between clients:\n%s", name, note, d.tool.Description)
		case has && knownMissing[name]:
			t.Errorf("%s now states the note: remove it from knownMissing", name)
		}
	}
	for name := range knownMissing {
		if !seen[name] {
			t.Errorf("knownMissing names %s, which is not an effectful tool", name)
		}
	}
	for _, l := range []Level{Observe, Assist, Full} {
		if !strings.Contains(instructions(l), note) {
			t.Errorf("the server instructions at %v do not say that %s", l, note)
		}
	}
}
