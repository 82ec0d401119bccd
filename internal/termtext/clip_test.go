package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 5, ""},
		{"short", 5, "short"},
		{"longer", 5, "longe…"},
		{"abc€", 5, "abc…"},                      // "€" would straddle byte 5
		{"abcd€", 5, "abcd…"},                    // ... and byte 5 here
		{"ab€d", 5, "ab€…"},                      // it ends exactly at the cut
		{"a😀bcdef", 3, "a…"},                     // a 4-byte character
		{"a😀bcdef", 5, "a😀…"},                    // whole at the cut
		{"\x80\x80\x80\x80\x80", 2, "\x80\x80…"}, // stray bytes: cut where asked
		{"abc\xe2\x82", 4, "abc\xe2…"},           // an incomplete sequence is no character
		{"anything", 0, "…"},
	} {
		if got := Clip(c.in, c.max); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// Whatever valid text is clipped where, the result is valid and at most
// max bytes before the mark.
func TestClipNeverSplitsACharacter(t *testing.T) {
	s := strings.Repeat("aé€😀", 8)
	for max := 0; max <= len(s); max++ {
		got := Clip(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Clip at %d: %q is not valid UTF-8", max, got)
		}
		body := strings.TrimSuffix(got, ellipsis)
		if len(body) > max || !strings.HasPrefix(s, body) || max-len(body) >= utf8.UTFMax {
			t.Fatalf("Clip at %d: %q", max, got)
		}
	}
}
