package mcpserver

import (
	"slices"
	"testing"

	"github.com/stem-edu/stem/internal/levels"
)

// stemctl reads the tools per level from package levels; the server's own
// definitions must say exactly the same, in the same order.
func TestLevelsTableMatchesDefinitions(t *testing.T) {
	for _, l := range []Level{Observe, Assist, Full} {
		if got, want := ToolNames(l), levels.ToolNames(l); !slices.Equal(got, want) {
			t.Errorf("%s: server defines %v\nlevels table says %v", l, got, want)
		}
	}
	if n := levels.ToolNames(0); len(n) != 0 {
		t.Errorf("level 0 has tools %v", n)
	}
}
