// Package jsonwire encodes the JSON that stem-mcp writes most: tool results
// that are maps of plain values around one large string (a pane capture, a
// buffer read). encoding/json escapes strings a byte at a time and
// re-validates the output of every nested Marshaler; for a 100 KB result
// that cost more than reading the buffer. Append handles the common value
// types itself, skips runs of plain ASCII eight bytes at a time, and hands
// every other type to encoding/json, so its output is always valid JSON that
// decodes to what encoding/json's would.
package jsonwire

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/lib/swar"
)

// Marshal returns the JSON encoding of v.
func Marshal(v any) ([]byte, error) {
	return Append(make([]byte, 0, estimate(v, 4)), v)
}

// Indent returns v as JSON indented by two spaces, with a final newline and
// <, > and & as they are: for files a person or a program reads, not for
// HTML.
func Indent(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// estimate guesses the encoded size of v, so that a large result is
// written into one buffer instead of being copied as it grows.
func estimate(v any, depth int) int {
	switch v := v.(type) {
	case string:
		return len(v) + len(v)/16 + 2
	case map[string]any:
		n := 2
		if depth > 0 {
			for k, e := range v {
				n += len(k) + 4 + estimate(e, depth-1)
			}
		}
		return n
	case []any:
		n := 2
		if depth > 0 {
			for _, e := range v {
				n += 1 + estimate(e, depth-1)
			}
		}
		return n
	}
	return 16
}

// Append appends the JSON encoding of v to dst. Maps are written with
// sorted keys, as encoding/json does. Unlike encoding/json it does not
// escape <, > and & (JSON does not require it).
func Append(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = Append(dst, v[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		return appendList(dst, v, Append)
	case []string:
		return appendList(dst, v, func(b []byte, e string) ([]byte, error) { return AppendString(b, e), nil })
	case []int:
		return appendList(dst, v, func(b []byte, e int) ([]byte, error) { return strconv.AppendInt(b, int64(e), 10), nil })
	}
	data, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

// appendList writes a JSON array (null for a nil slice), each element by enc.
func appendList[T any](dst []byte, list []T, enc func([]byte, T) ([]byte, error)) ([]byte, error) {
	if list == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, e := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = enc(dst, e); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// special is non-zero when some byte of w needs a look: below 0x20, '"',
// '\\', or not ASCII. The lowest flagged byte is always a real one.
func special(w uint64) uint64 {
	return (swar.Below(w, 0x20) | swar.Has(w, '"') | swar.Has(w, '\\') | w) & swar.MSB
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// U+2028/U+2029 are escaped, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(s) {
		// Skip eight plain ASCII bytes at a time.
		for i+8 <= len(s) {
			if m := special(swar.Load8(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, hex[r&0xf])
				i += size
				start = i
				continue
			}
			i += size
		case c < 0x20 || c == '"' || c == '\\':
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
		default:
			i++
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
