package hostterm

import (
	"bytes"
	"unicode/utf8"
)

// keepCSI decides a complete CSI sequence by its parameter bytes (private
// marker, numbers, intermediates) and final byte. It keeps drawing,
// cursor, erase, scroll and mode sequences, and the two device-attribute
// queries tmux uses whose answers are fixed by the terminal. Window
// reports (CSI t: a title report types attacker-chosen text back),
// status reports, mode requests (DECRQM), printing (CSI i) and every
// sequence not listed are dropped.
func keepCSI(params []byte, final byte) bool {
	var priv byte
	if len(params) > 0 && params[0] >= '<' && params[0] <= '?' {
		priv, params = params[0], params[1:]
	}
	nums, inter := params, []byte(nil)
	for k, c := range params {
		if c <= 0x2f {
			nums, inter = params[:k], params[k:]
			break
		}
	}
	for _, c := range inter {
		if c > 0x2f {
			return false // a parameter after an intermediate
		}
	}
	for _, c := range nums {
		if !(c >= '0' && c <= '9' || c == ';' || c == ':' && final == 'm' && priv == 0) {
			return false
		}
	}
	switch {
	case priv == 0 && len(inter) == 0:
		switch final {
		case 'm', // SGR
			'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'f', 'd', 'e', 'a', '`', // cursor
			'J', 'K', 'X', 'P', '@', 'L', 'M', 'S', // erase, insert, delete, scroll up
			'r', 's', 'u', // scroll region, save and restore the cursor
			'b', 'g', 'Z', 'I': // repeat, tabs
			return true
		case 'T': // scroll down; with more parameters it starts mouse highlighting
			return bytes.IndexByte(nums, ';') < 0
		case 'h', 'l':
			return modesIn(nums, ansiModes)
		case 'c': // DA1: the answer is the terminal's fixed identity
			return len(nums) == 0 || string(nums) == "0"
		}
	case priv == '?' && len(inter) == 0:
		switch final {
		case 'h', 'l':
			return modesIn(nums, decModes)
		case 'J', 'K': // selective erase
			return true
		}
	case priv == '>' && len(inter) == 0:
		switch final {
		case 'c': // DA2, which tmux sends to learn the terminal's features
			return len(nums) == 0 || string(nums) == "0"
		case 'm': // modifyOtherKeys off or level 1 (level 2 re-encodes Ctrl-])
			switch string(nums) {
			case "4", "4;0", "4;1":
				return true
			}
		}
	case priv == 0 && string(inter) == " " && final == 'q': // cursor style
		return len(nums) <= 1
	}
	return false
}

// ansiModes and decModes are the modes tmux sets: insert mode; cursor
// keys, reverse video (visual bell), origin, autowrap, cursor blink and
// visibility, the alternate screen, mouse reporting and its encodings,
// focus events, bracketed paste, synchronized output.
var (
	ansiModes = []string{"4"}
	decModes  = []string{"1", "5", "6", "7", "12", "25", "47", "1000", "1002", "1003", "1004",
		"1005", "1006", "1015", "1047", "1048", "1049", "2004", "2026"}
)

func modesIn(nums []byte, allowed []string) bool {
	if len(nums) == 0 {
		return false
	}
	for _, m := range bytes.Split(nums, []byte{';'}) {
		ok := false
		for _, a := range allowed {
			if string(m) == a {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// maxTitle bounds a kept window or icon title.
const maxTitle = 256

// keepOSC appends the kept form of an OSC string (its body, without ESC ]
// and terminator) to out, or nothing. Titles (0, 1, 2) are kept when they
// are printable UTF-8 of at most maxTitle bytes; the cursor colour (12,
// 112) when it is a plain colour name or spec. Clipboard (52), colour
// queries and changes (4, 10, 11, 104, ...), hyperlinks (8), the working
// directory (7), notifications and every other OSC are dropped. A kept
// string is re-emitted with a BEL terminator.
func keepOSC(out, body []byte) []byte {
	ps, pt, ok := bytes.Cut(body, []byte{';'})
	switch string(ps) {
	case "0", "1", "2":
		if !ok || len(pt) > maxTitle || !printable(pt) {
			return out
		}
	case "12":
		if !ok || !colourSpec(pt) {
			return out
		}
	case "112":
		if ok && len(pt) > 0 {
			return out
		}
	default:
		return out
	}
	out = append(out, 0x1b, ']')
	out = append(out, body...)
	return append(out, 0x07)
}

// printable: valid UTF-8 without C0, DEL or C1 controls.
func printable(s []byte) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 || r < 0x20 || r >= 0x7f && r <= 0x9f {
			return false
		}
		s = s[n:]
	}
	return true
}

func colourSpec(s []byte) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '#' || c == ':' || c == '/' || c == ' ') {
			return false // "?" is a query
		}
	}
	return true
}
