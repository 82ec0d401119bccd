package termtext

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	cases := []struct {
		name string
		in   string
		opt  Options
		want string
	}{
		{"plain", "hello\tworld\n", Options{}, "hello\tworld\n"},
		{"crlf", "a\r\nb\r\n", Options{}, "a\nb\n"},
		{"lone cr becomes newline", "50%\r100%", Options{}, "50%\n100%"},
		{"overstrike cr", "50%\r100%\n", Options{Overstrike: true}, "100%\n"},
		{"overstrike shorter", "abcdef\rXY", Options{Overstrike: true}, "XYcdef"},
		{"overstrike backspace", "ab\bX", Options{Overstrike: true}, "aX"},
		{"backspace dropped", "ab\bX", Options{}, "abX"},
		{"sgr stripped", "\x1b[1;31mred\x1b[0m", Options{}, "red"},
		{"sgr kept", "\x1b[1;31mred\x1b[0m", Options{KeepSGR: true}, "\x1b[1;31mred\x1b[0m"},
		{"sgr with colon kept", "\x1b[38:5:1mx", Options{KeepSGR: true}, "\x1b[38:5:1mx"},
		{"private sgr-like dropped", "\x1b[?1mx\x1b[>4;1m", Options{KeepSGR: true}, "x"},
		{"sgr with intermediate dropped", "\x1b[1 mx", Options{KeepSGR: true}, "x"},
		{"cursor moves dropped", "\x1b[2J\x1b[H\x1b[10;20Hx", Options{KeepSGR: true}, "x"},
		{"osc title bel", "\x1b]2;evil title\x07after", Options{}, "after"},
		{"osc st", "\x1b]52;c;ZXZpbA==\x1b\\after", Options{}, "after"},
		{"osc 133 marker", "a\x1b]133;D;0\x07b", Options{}, "ab"},
		{"dcs", "\x1bPq#0;2;0;0;0#1\x1b\\x", Options{}, "x"},
		{"apc pm sos", "\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\x", Options{}, "x"},
		{"osc aborted by esc", "\x1b]2;t\x1b[31mx", Options{KeepSGR: true}, "\x1b[31mx"},
		{"osc cancelled by can", "\x1b]2;t\x18x", Options{}, "x"},
		{"unterminated osc hides rest", "a\x1b]2;never ends\nmore", Options{}, "a"},
		{"c1 csi", "\u009b31mx", Options{}, "x"},
		{"c1 osc with c1 st", "\u009d0;t\u009cx", Options{}, "x"},
		{"c1 other dropped", "a\u0085b", Options{}, "ab"},
		{"raw c1 byte is invalid utf8", "a\x9b31mb", Options{}, "a\ufffd31mb"},
		{"invalid utf8", "a\xffb\xc3", Options{}, "a\ufffdb\ufffd"},
		{"controls dropped", "a\x00\x01\x07\x7fb", Options{}, "ab"},
		{"charset and keypad escapes", "\x1b(Bx\x1b=y\x1b7z", Options{}, "xyz"},
		{"lone esc at end", "x\x1b", Options{}, "x"},
		{"esc before newline", "x\x1b\ny", Options{}, "x\ny"},
		{"csi interrupted by newline", "x\x1b[12\ny", Options{}, "x\ny"},
		{"bidi override dropped", "abc\u202edcba\u202c", Options{}, "abcdcba"},
		{"utf8 kept", "zażółć gęślą jaźń ✓", Options{}, "zażółć gęślą jaźń ✓"},
		{"cap", "abcdef", Options{MaxBytes: 4}, "abcd"},
		{"cap at rune boundary", "aé", Options{MaxBytes: 2}, "a"},
		{"cap overstrike", "abcdef\n", Options{Overstrike: true, MaxBytes: 3}, "abc"},
		{"overstrike sgr", "\x1b[1mab\x1b[0m\rX\n", Options{Overstrike: true, KeepSGR: true}, "\x1b[1mXb\x1b[0m\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, truncated := Sanitize([]byte(c.in), c.opt)
			if got != c.want {
				t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
			}
			wantTrunc := c.opt.MaxBytes > 0 && c.want != got || strings.HasPrefix(c.name, "cap")
			if truncated != wantTrunc {
				t.Errorf("truncated = %v, want %v", truncated, wantTrunc)
			}
		})
	}
}

func TestStringDefault(t *testing.T) {
	if got := String("\x1b[31mx\x1b]0;t\x07\r\n"); got != "x\n" {
		t.Fatalf("String = %q", got)
	}
}

// check asserts the invariants every output must keep.
func check(t *testing.T, in []byte, opt Options, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output not valid UTF-8: %q (input %q)", out, in)
	}
	if limit := 3*len(in) + 1; len(out) > limit {
		t.Fatalf("output %d bytes for %d input bytes", len(out), len(in))
	}
	if opt.MaxBytes > 0 && len(out) > opt.MaxBytes {
		t.Fatalf("output %d bytes over cap %d", len(out), opt.MaxBytes)
	}
	rest := out
	for rest != "" {
		if opt.KeepSGR && strings.HasPrefix(rest, "\x1b[") {
			end := strings.IndexByte(rest, 'm')
			if end < 0 || !sgrParams([]byte(rest[2:end])) {
				t.Fatalf("escape other than SGR survived: %q (input %q)", rest, in)
			}
			rest = rest[end+1:]
			continue
		}
		r, size := utf8.DecodeRuneInString(rest)
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || isBidiControl(r) {
			t.Fatalf("control %U survived in %q (input %q)", r, out, in)
		}
		rest = rest[size:]
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		"plain", "\x1b[31mx", "\x1b]0;t\x07", "\x1bP\x1b\\", "\u009b1m", "\xff\xfe", "a\r\nb\rc\b",
		"\x1b[" + strings.Repeat("9", 100) + "m", "\x1b]" + strings.Repeat("x", 100),
	} {
		f.Add([]byte(s), false, false, 0)
		f.Add([]byte(s), true, true, 5)
	}
	f.Fuzz(func(t *testing.T, in []byte, sgr, over bool, max int) {
		if max < 0 {
			max = -max
		}
		opt := Options{KeepSGR: sgr, Overstrike: over, MaxBytes: max % 4096}
		out, _ := Sanitize(in, opt)
		check(t, in, opt, out)
		if !over && opt.MaxBytes == 0 {
			// Sanitized text is a fixed point.
			again, _ := Sanitize([]byte(out), opt)
			if again != out {
				t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
			}
		}
	})
}

func TestHostileInputIsLinear(t *testing.T) {
	// Patterns that make naive sanitizers rescan: many unterminated
	// introducers, long parameter runs, nested aborts.
	inputs := map[string][]byte{
		"esc-bracket": bytes.Repeat([]byte("\x1b["), 1<<19),
		"esc-osc":     bytes.Repeat([]byte("\x1b]\x1b"), 1<<19),
		"params":      append([]byte("\x1b["), bytes.Repeat([]byte("1;"), 1<<20)...),
		"c1":          bytes.Repeat([]byte("\u009b"), 1<<19),
		"invalid":     bytes.Repeat([]byte{0xe2, 0x82}, 1<<19),
	}
	for name, in := range inputs {
		start := time.Now()
		out, _ := Sanitize(in, Options{KeepSGR: true, Overstrike: true})
		d := time.Since(start)
		check(t, in, Options{KeepSGR: true}, out)
		t.Logf("%s: %d bytes in, %d out, %v", name, len(in), len(out), d)
		// A linear pass over 1 MiB takes milliseconds (BenchmarkSanitize
		// times it); a rescan per introducer would take hours. The bound
		// tells those apart, not fast from slow: a loaded 2-core machine
		// under the race detector took 4 s for "invalid".
		if d > time.Minute {
			t.Errorf("%s: %v for %d bytes: not linear", name, d, len(in))
		}
	}
}

func BenchmarkSanitize(b *testing.B) {
	var buf bytes.Buffer
	for buf.Len() < 1<<20 {
		buf.WriteString("\x1b[1;32mgcc\x1b[0m -O2 -c main.c -o main.o\r\n")
		buf.WriteString("main.c:12:5: \x1b[35mwarning:\x1b[0m unused variable ‘x’\r\n")
		buf.WriteString("\x1b]133;D;0\x07progress 42%\r")
	}
	in := buf.Bytes()
	for _, opt := range []struct {
		name string
		o    Options
	}{{"plain", Options{}}, {"sgr", Options{KeepSGR: true}}, {"overstrike", Options{Overstrike: true}}} {
		b.Run(opt.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				Sanitize(in, opt.o)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 0, "plain"},
		{"a\nb\r\n\tc  d", 0, "a b c d"},
		{"red \x1b[31mtext\x1b[0m\x07 bell\x00", 0, "red text bell"},
		{"abcdef", 4, "abcd…"},
		{"ab\u00e9cd", 3, "ab…"}, // é is two bytes: not cut in half
		{"abc", 3, "abc"},
		{"", 5, ""},
	} {
		if got := OneLine(c.in, c.max); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
