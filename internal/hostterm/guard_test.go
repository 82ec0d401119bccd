package hostterm

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func filterAll(p []byte) []byte { return NewGuard(io.Discard).Filter(nil, p) }

// filterBytewise feeds p one byte per write, as a slow pipe might.
func filterBytewise(p []byte) []byte {
	g, out := NewGuard(io.Discard), []byte(nil)
	for i := range p {
		out = g.Filter(out, p[i:i+1])
	}
	return out
}

func TestGuardExact(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"text", "hello, world\r\n", "hello, world\r\n"},
		{"utf8", "zażółć 漢字 ✓", "zażółć 漢字 ✓"},
		{"sgr", "\x1b[1;38;5;196mred\x1b[0m \x1b[38:2::1:2:3mx", "\x1b[1;38;5;196mred\x1b[0m \x1b[38:2::1:2:3mx"},
		{"cursor and erase", "\x1b[12;40H\x1b[K\x1b[2J\x1b[3A\x1b[1;23r\x1b[4h\x1b[4l", "\x1b[12;40H\x1b[K\x1b[2J\x1b[3A\x1b[1;23r\x1b[4h\x1b[4l"},
		{"dec modes", "\x1b[?1049h\x1b[?1000;1006h\x1b[?2004h\x1b[?25l\x1b[?12l", "\x1b[?1049h\x1b[?1000;1006h\x1b[?2004h\x1b[?25l\x1b[?12l"},
		{"esc singles", "\x1b7\x1b8\x1b=\x1b>\x1b(0q\x1b(B\x1bM\x1bc", "\x1b7\x1b8\x1b=\x1b>\x1b(0q\x1b(B\x1bM\x1bc"},
		{"cursor style", "\x1b[2 q", "\x1b[2 q"},
		{"c0 kept and dropped", "a\x07b\x08c\td\x0ee\x0ff\x05g\x00h\x7fi\x1aj", "a\x07b\x08c\td\x0ee\x0ffghij"},
		{"osc52 bel", "a\x1b]52;c;ZWNobyBwd25lZA==\x07b", "ab"},
		{"osc52 st", "a\x1b]52;c;ZWNobyBwd25lZA==\x1b\\b", "ab"},
		{"tmux passthrough", "a\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\b", "ab"},
		{"decrqss", "a\x1bP$qm\x1b\\b", "ab"},
		{"sixel", "a\x1bPq#0;2;0;0;0#0~~@@vv@@~~\x1b\\b", "ab"},
		{"kitty graphics query", "a\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\b", "ab"},
		{"pm sos", "a\x1b^secret\x1b\\b\x1bXsos\x1b\\c", "abc"},
		{"title kept", "\x1b]2;my title\x07x", "\x1b]2;my title\x07x"},
		{"title st rewritten", "\x1b]0;t\x1b\\x", "\x1b]0;t\x07x"},
		{"title with control", "\x1b]2;a\x05b\x07x", "x"},
		{"title with c1", "\x1b]2;a\u009bb\x07x", "x"},
		{"title too long", "\x1b]2;" + strings.Repeat("t", 300) + "\x07x", "x"},
		{"osc colour query", "\x1b]10;?\x07\x1b]11;?\x1b\\\x1b]4;1;?\x07x", "x"},
		{"osc colour set", "\x1b]4;1;rgb:ff/00/00\x07\x1b]11;#000000\x07x", "x"},
		{"cursor colour", "\x1b]12;#ff0000\x07\x1b]112\x07\x1b]12;?\x07x", "\x1b]12;#ff0000\x07\x1b]112\x07x"},
		{"hyperlink and cwd", "\x1b]8;;http://e/\x07l\x1b]8;;\x07\x1b]7;file:///x\x07", "l"},
		{"title report", "\x1b[21t\x1b[20t\x1b[14t\x1b[8;1;1tx", "x"},
		{"da", "\x1b[c\x1b[0c\x1b[>c\x1b[>0c\x1b[=c\x1b[1c", "\x1b[c\x1b[0c\x1b[>c\x1b[>0c"},
		{"dsr and friends", "\x1b[5n\x1b[6n\x1b[?6n\x1b[>q\x1b[?2004$p\x1b[5i\x1b[xx", "x"},
		{"modify other keys", "\x1b[>4;1m\x1b[>4;2m\x1b[>4m", "\x1b[>4;1m\x1b[>4m"},
		{"unknown modes", "\x1b[?3h\x1b[?1049;3h\x1b[20h\x1b[?hx", "x"},
		{"decid", "\x1bZ\x1b%Gx", "x"},
		{"c1 in utf8", "a\u009b2Jb\u0090q\u009cc", "a2Jbqc"},
		{"raw c1 and invalid", "a\x9b2Jb\xff\xc0\x80c", "a2Jbc"},
		{"control inside csi", "\x1b[1\n2mx", "\n2mx"},
		{"can inside csi", "\x1b[1\x182mx", "2mx"},
		{"esc restarts", "\x1b[1\x1b[2Jx", "\x1b[2Jx"},
		{"esc ends a dcs", "\x1bPq\x1b[31mx", "\x1b[31mx"},
		{"esc ends an osc", "\x1b]52;c;eA\x1b[31mx", "\x1b[31mx"},
		{"long csi", "\x1b[" + strings.Repeat("1;", 40) + "mx", "x"},
		{"colon outside sgr", "\x1b[1:2Hx", "x"},
		{"replacement char kept", "\ufffd", "\ufffd"},
	}
	for _, c := range cases {
		got := filterAll([]byte(c.in))
		if string(got) != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		if bw := filterBytewise([]byte(c.in)); !bytes.Equal(bw, got) {
			t.Errorf("%s: byte by byte %q, whole %q", c.name, bw, got)
		}
	}
}

// TestGuardHoldsPartial: a sequence cut by the end of a write is held, not
// passed in halves, so the host's own writes land between whole sequences.
func TestGuardHoldsPartial(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	g := NewGuard(&term)
	g.Write([]byte("ab\x1b[3"))
	if term.String() != "ab" || g.AtGround() {
		t.Fatalf("after a cut CSI: wrote %q, at ground %v", term.String(), g.AtGround())
	}
	g.Write([]byte("1mc\xe2\x9c"))
	if term.String() != "ab\x1b[31mc" || g.AtGround() {
		t.Fatalf("after a cut rune: wrote %q, at ground %v", term.String(), g.AtGround())
	}
	g.Write([]byte("\x93"))
	if term.String() != "ab\x1b[31mc✓" || !g.AtGround() {
		t.Fatalf("after the rune's end: wrote %q, at ground %v", term.String(), g.AtGround())
	}
}

func TestGuardCursorSaved(t *testing.T) {
	t.Parallel()
	g := NewGuard(io.Discard)
	for _, step := range []struct {
		in    string
		saved bool
	}{{"\x1b7", true}, {"x", true}, {"\x1b8", false}, {"\x1b[s", true}, {"\x1b[u", false}, {"\x1b7\x1bc", false}} {
		g.Write([]byte(step.in))
		if g.CursorSaved() != step.saved {
			t.Fatalf("after %q: saved %v, want %v", step.in, g.CursorSaved(), step.saved)
		}
	}
}

// forbidden are byte strings that must never reach the terminal.
var forbidden = []string{"\x1b]52", "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x1b[21t", "\x1b[20t", "\x1b]10;?", "\x1b]11;?",
	"\x1b]4;", "\x1b[5n", "\x1b[6n", "\x1bZ", "\x05", "\u009b", "\u0090", "\u009d", "\u009f"}

func FuzzGuard(f *testing.F) {
	for _, s := range []string{"hello\r\n", "\x1b]52;c;eA==\x07", "\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\", "\x1b_Gi=31,s=1,v=1,a=q,t=d\x1b\\",
		"\x1b[21t", "\x1b]2;t\x07", "\x1b[?1049h\x1b[1;24r", "\x1b(0q\x1b(B", "\xe2\x9c\x93", "\x1b]12;red\x1b\\"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		whole := filterAll(in)
		// The output is a fixed point: the terminal's parser, reading it,
		// finds exactly the sequences Guard kept.
		if again := filterAll(whole); !bytes.Equal(again, whole) {
			t.Fatalf("not a fixed point: %q -> %q -> %q", in, whole, again)
		}
		// Where the writes are cut does not matter.
		g, split := NewGuard(io.Discard), []byte(nil)
		for i := 0; i < len(in); {
			n := int(cut%7) + 1
			if i+n > len(in) {
				n = len(in) - i
			}
			split = g.Filter(split, in[i:i+n])
			i += n
		}
		if !bytes.Equal(split, whole) {
			t.Fatalf("cut every %d: %q, whole %q", cut%7+1, split, whole)
		}
		for _, bad := range forbidden {
			if bytes.Contains(whole, []byte(bad)) {
				t.Fatalf("%q passed %q: %q", in, bad, whole)
			}
		}
	})
}
