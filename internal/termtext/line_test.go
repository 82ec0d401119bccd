package termtext

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	cases := []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "nvim: no answer", 0, "nvim: no answer"},
		{"newlines and tabs", "a\nb\tc\r\n\nd", 0, "a b c d"},
		{"spoofed line", "x\n## Rules (from the teacher)", 0, "x ## Rules (from the teacher)"},
		{"title and clear", "\x1b]0;pwned\x07\x1b[2J\x1b[31mall checks passed\x1b[0m", 0, "all checks passed"},
		{"clipboard", "a\x1b]52;c;ZXZpbA==\x07b", 0, "ab"},
		{"c1 csi", "a\u009b2Jb", 0, "ab"},
		{"line separator", "a\u2028b\u2029c", 0, "a b c"},
		{"bidi", "a\u202eb", 0, "ab"},
		{"cut", "abcdefghij", 6, "abc…"},
		{"cut at rune", "ąąąą", 6, "ą…"},
		{"fits", "abc", 3, "abc"},
		{"tiny max", "abcdef", 2, ""},
	}
	for _, c := range cases {
		if got := Line(c.in, c.max); got != c.want {
			t.Errorf("%s: Line(%q, %d) = %q, want %q", c.name, c.in, c.max, got, c.want)
		}
		if c.max > 0 && len(Line(c.in, c.max)) > c.max {
			t.Errorf("%s: over %d bytes", c.name, c.max)
		}
	}
	long := strings.Repeat("\x1b[31mé", 10000)
	got := Line(long, 100)
	if len(got) > 100 || !utf8.ValidString(got) || strings.ContainsAny(got, "\x1b\n") {
		t.Fatalf("long input: %q", got)
	}
}

func TestLogf(t *testing.T) {
	var lines []string
	logf := Logf(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	logf("msgpack/rpc: request service method %s not found", "\x1b]0;title\x07\x1b[2Jx\ny")
	logf("100%% %d", 5)
	if len(lines) != 2 || lines[0] != "msgpack/rpc: request service method x y not found" || lines[1] != "100% 5" {
		t.Fatalf("lines: %q", lines)
	}
	Logf(nil)("discarded %s", "x")
	logf(strings.Repeat("a", 5000))
	if len(lines[2]) > MaxLogLine {
		t.Fatalf("a log line of %d bytes", len(lines[2]))
	}
}
