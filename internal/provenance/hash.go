package provenance

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"unicode/utf8"
)

// LineHash identifies one line's content: the first 16 bytes of its
// sha256 (a collision by chance is out of reach; one made on purpose
// could only mis-attribute a line of the file it is in).
type LineHash [16]byte

// HashLine hashes one line. A final '\r' is dropped, so a line of a file
// saved with DOS line ends hashes as the same line in the buffer, where
// Neovim keeps no '\r'.
func HashLine(s string) LineHash {
	s = strings.TrimSuffix(s, "\r")
	sum := sha256.Sum256([]byte(s))
	var h LineHash
	copy(h[:], sum[:])
	return h
}

// HashLines hashes each line.
func HashLines(lines []string) []LineHash {
	out := make([]LineHash, len(lines))
	for i, l := range lines {
		out[i] = HashLine(l)
	}
	return out
}

// SplitFile returns a file's lines as Neovim reads them into a buffer
// with its default 'fileencodings' (ucs-bom,utf-8,default,latin1): a UTF-8
// byte order mark dropped, a file that is not UTF-8 read as latin1, split
// at '\n', the final newline ending the last line rather than starting
// an empty one.
func SplitFile(data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(data) == 0 {
		return nil
	}
	if !utf8.Valid(data) {
		runes := make([]rune, len(data))
		for i, b := range data {
			runes[i] = rune(b)
		}
		data = []byte(string(runes))
	}
	data = bytes.TrimSuffix(data, []byte{'\n'})
	return strings.Split(string(data), "\n")
}

func pack(hs []LineHash) []byte {
	out := make([]byte, 0, len(hs)*len(LineHash{}))
	for _, h := range hs {
		out = append(out, h[:]...)
	}
	return out
}

// unpack reverses pack; ok is false when b is not whole hashes.
func unpack(b []byte) ([]LineHash, bool) {
	const n = len(LineHash{})
	if len(b)%n != 0 {
		return nil, false
	}
	out := make([]LineHash, len(b)/n)
	for i := range out {
		copy(out[i][:], b[i*n:])
	}
	return out, true
}
