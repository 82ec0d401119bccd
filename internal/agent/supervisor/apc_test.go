package supervisor

import (
	"testing"
)

// APC strings go, in one read or split across reads at every byte;
// everything else, other escape sequences included, stays as it was.
func TestAPCStrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"a\x1b_Gi=31,s=1,v=1,a=q,t=d;AAAA\x1b\\b", "ab"},
		{"\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[c", "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[c"},
		{"\x1b\x1b_x\x1b\\y", "\x1by"},
		{"\x1b_one\x1b\\\x1b_two\x1b\\z", "z"},
		{"\x1b_cut\x18after", "after"},
		{"\x1b_a\x1b[1mbold", "\x1b[1mbold"},
		{"ends with \x1b", "ends with "},
	} {
		var f apcStrip
		if got := string(f.filter(nil, []byte(c.in))); got != c.want {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
		var g apcStrip
		var out []byte
		for i := range len(c.in) {
			out = g.filter(out, []byte{c.in[i]})
		}
		if string(out) != c.want {
			t.Errorf("%q a byte at a time: %q, want %q", c.in, out, c.want)
		}
	}
	// The held ESC is passed on with the byte that follows it.
	var f apcStrip
	if got := string(f.filter(nil, []byte("x\x1b"))); got != "x" {
		t.Fatalf("%q", got)
	}
	if got := string(f.filter(nil, []byte("[H"))); got != "\x1b[H" {
		t.Fatalf("after a held ESC: %q", got)
	}
}
