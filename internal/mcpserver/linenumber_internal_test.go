package mcpserver

import (
	"fmt"
	"testing"
)

// TestLineNumberCounts checks the in-place counter against Sprintf across
// carries, widening and restarts.
func TestLineNumberCounts(t *testing.T) {
	for _, c := range []struct{ from, to, width int }{{1, 1200, 4}, {1, 120, 1}, {95, 1005, 2}, {9990, 10010, 5}, {0, 12, 0}} {
		var ln lineNumber
		ln.set(c.from, c.width)
		for n := c.from; n <= c.to; n++ {
			if n > c.from {
				ln.next()
			}
			if want := fmt.Sprintf("%*d", c.width, n); string(ln.field) != want {
				t.Fatalf("from %d width %d: at %d got %q, want %q", c.from, c.width, n, ln.field, want)
			}
		}
	}
}
