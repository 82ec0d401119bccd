package mcpserver

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/lib/jsonwire"
)

// TestCleanJSON: every string and key of a nested result is sanitized,
// numbers stay exact, and keys that become equal are all kept.
func TestCleanJSON(t *testing.T) {
	type frame struct {
		Func string `json:"func"`
		Line int    `json:"line"`
	}
	in := map[string]any{
		"a\x1b[31m": "x\x1b]0;TITLE\x07y\u202e",
		"a":         "plain",
		"big":       uint64(1<<63 + 1),
		"frames":    []any{frame{Func: "f\u009b31m", Line: 7}, &frame{Func: "g\x07"}},
		"nested":    map[string]any{"k": []string{"\x1bPq\x1b\\v"}},
	}
	out, err := cleanJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := jsonwire.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	for _, want := range []string{`"a":"plain"`, `"a#":"xy"`, `"big":9223372036854775809`, `"func":"f","line":7`, `"func":"g"`, `"k":["v"]`} {
		if !strings.Contains(got, want) {
			t.Errorf("cleanJSON: %s lacks %s", got, want)
		}
	}
	if strings.Contains(got, `\u001b`) || strings.Contains(got, "\u202e") || strings.Contains(got, `\u0007`) || strings.Contains(got, "TITLE") {
		t.Errorf("cleanJSON left a control: %s", got)
	}
}
