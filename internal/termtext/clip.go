package termtext

import "unicode/utf8"

// Clip returns s cut to at most max bytes, with "…" after a cut (so a
// clipped result is up to len("…") bytes longer than max). It never cuts
// a UTF-8 character in half; it does not sanitize (String, Line and
// OneLine do). For bounding free text in records and messages: an audit
// detail, a provenance note, a value quoted in an error.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return prefix(s, max) + ellipsis
}

// prefix is the longest prefix of s of at most n bytes that does not end
// inside a valid UTF-8 character. Only a character that really straddles
// the cut moves it: stray continuation bytes are cut like any byte, so
// the search looks back at most utf8.UTFMax-1 bytes.
func prefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if _, size := utf8.DecodeRuneInString(s[i:]); size > 1 && i+size > n {
			return s[:i]
		}
		break
	}
	return s[:n]
}
