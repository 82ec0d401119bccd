// Package swar holds the word-at-a-time helpers that let text scanners
// (JSON escaping, text hygiene) look at eight bytes per step: source code
// and terminal text are nearly all plain ASCII, so most words need no look
// at their bytes.
package swar

const (
	// LSB has the low bit of every byte set: LSB*c repeats byte c.
	LSB = 0x0101010101010101
	// MSB has the high bit of every byte set.
	MSB = 0x8080808080808080
)

// Load8 reads s[i:i+8] little-endian; the compiler turns it into one load.
func Load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// Below flags, in the high bit of each byte, the bytes of w below n
// (n <= 0x80). Has flags the bytes equal to c. Bits other than the high
// ones are noise: OR the flags together and mask the result with MSB once.
// The lowest flagged byte is always a real one (a borrow may flag bytes
// above it, never below), so bits.TrailingZeros64(m)/8 is its index.
func Below(w uint64, n byte) uint64 { return (w - LSB*uint64(n)) &^ w }

// Has: see Below.
func Has(w uint64, c byte) uint64 {
	x := w ^ (LSB * uint64(c))
	return (x - LSB) &^ x
}
