package swar

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestAgainstBytes checks Below and Has against byte-by-byte answers: zero
// exactly when no byte matches, and the lowest flag on the first match.
func TestAgainstBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 0x1f, 0x20, '"', '\\', 'a', 0x7e, 0x7f, 0x80, 0xff}
	for n := 0; n < 200000; n++ {
		var b [8]byte
		for i := range b {
			if r.IntN(2) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		w := Load8(string(b[:]), 0)
		check := func(name string, got uint64, match func(byte) bool) {
			first := -1
			for i, c := range b {
				if match(c) {
					first = i
					break
				}
			}
			if (got == 0) != (first < 0) || first >= 0 && bits.TrailingZeros64(got)/8 != first {
				t.Fatalf("%s(%x) = %x, first match at %d", name, b, got, first)
			}
		}
		check("Below 0x20", Below(w, 0x20)&MSB, func(c byte) bool { return c < 0x20 })
		check("Below 0x80", Below(w, 0x80)&MSB, func(c byte) bool { return c < 0x80 })
		check("Has '\"'", Has(w, '"')&MSB, func(c byte) bool { return c == '"' })
		check("Has 0x7f", Has(w, 0x7f)&MSB, func(c byte) bool { return c == 0x7f })
	}
}
