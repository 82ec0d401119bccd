package tmux

import (
	"strings"
	"testing"
)

// The length limits live beside the regexps now (see ids.go): each bound
// and one past it.
func TestNameLimits(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		name string
		f    func(string) bool
		s    string
		ok   bool
	}{
		{"session", validSession, a(64), true},
		{"session", validSession, a(65), false},
		{"session", validSession, "", false},
		{"session", validSession, "a:b", false},
		{"user option", validUserOpt, "@" + a(64), true},
		{"user option", validUserOpt, "@" + a(65), false},
		{"user option", validUserOpt, "@", false},
		{"format", validFormatVar, "@" + a(64), true},
		{"format", validFormatVar, "@" + a(65), false},
		{"format", validFormatVar, a(64), true},
		{"format", validFormatVar, a(65), false},
		{"format", validFormatVar, "pane_id", true},
		{"format", validFormatVar, "1pane", false},
		{"format", validFormatVar, "#(id)", false},
	} {
		if got := c.f(c.s); got != c.ok {
			t.Errorf("%s %q (%d bytes): %v, want %v", c.name, c.s, len(c.s), got, c.ok)
		}
	}
}
