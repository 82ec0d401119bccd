package hostterm

import (
	"bytes"
	"io"
	"unicode/utf8"
)

// Guard filters the byte stream from the container's tmux client to the
// host terminal. It is a streaming parser: a sequence split across writes
// is held until it is complete, and what Guard passes on is always whole
// (printable UTF-8, a kept C0 control, or a complete kept sequence), so
// the terminal never sees half of something and Guard and the terminal
// agree on where every sequence begins and ends.
//
// What it keeps and drops is listed in docs/security.md ("The host
// terminal"); keep the two in step.
type Guard struct {
	w   io.Writer
	st  state
	seq []byte // the sequence being collected, from its ESC (or a partial UTF-8 rune)
	bad bool   // the sequence is malformed or too long: drop it when it ends
	out []byte
	// saved: the stream saved the cursor (ESC 7, CSI s) and has not
	// restored it; the host line must not use the one save slot then.
	saved bool
	// alt: the stream is on the alternate screen; sawAlt: it has used it.
	alt, sawAlt bool
}

type state uint8

const (
	stGround state = iota
	stUTF8         // inside a multi-byte UTF-8 rune
	stEsc          // after ESC (and intermediates)
	stCSI          // ESC [
	stOSC          // ESC ]
	stOSCEsc       // ESC inside an OSC string
	stStr          // DCS, SOS, PM, APC: swallowed
	stStrEsc       // ESC inside one of those
)

// maxSeq bounds a kept CSI or ESC sequence; maxOSC an OSC string.
const (
	maxSeq = 64
	maxOSC = 512
)

// NewGuard returns a Guard writing to w.
func NewGuard(w io.Writer) *Guard {
	return &Guard{w: w, seq: make([]byte, 0, maxOSC+8), out: make([]byte, 0, 32<<10)}
}

// AtGround reports whether the stream is between sequences: nothing is
// held, so a write of the host's own to the terminal lands between two
// things Guard passed and cannot change their meaning.
func (g *Guard) AtGround() bool { return g.st == stGround }

// LeftAltScreen reports whether the stream used the alternate screen and
// has left it (tmux does on detach): what follows is on the main screen.
func (g *Guard) LeftAltScreen() bool { return g.sawAlt && !g.alt }

// altMode: the modes switch to or from the alternate screen.
func altMode(nums []byte) bool {
	for _, m := range bytes.Split(nums, []byte{';'}) {
		switch string(m) {
		case "47", "1047", "1049":
			return true
		}
	}
	return false
}

// CursorSaved reports whether the stream holds the terminal's saved
// cursor (ESC 7 or CSI s without its restore).
func (g *Guard) CursorSaved() bool { return g.saved }

// Write filters p and writes what is kept in one write. It returns len(p)
// unless the underlying write fails.
func (g *Guard) Write(p []byte) (int, error) {
	g.out = g.filter(g.out[:0], p)
	if len(g.out) > 0 {
		if _, err := g.w.Write(g.out); err != nil {
			return 0, err
		}
	}
	if cap(g.out) > 256<<10 {
		g.out = make([]byte, 0, 32<<10)
	}
	return len(p), nil
}

// Filter returns what Write would pass on for p, appended to out; for
// tests and callers that write themselves.
func (g *Guard) Filter(out, p []byte) []byte { return g.filter(out, p) }

func (g *Guard) filter(out, p []byte) []byte {
	i := 0
	for i < len(p) {
		if g.st == stGround {
			// The common case: a run of printable ASCII.
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x7f {
				j++
			}
			out = append(out, p[i:j]...)
			i = j
			if i == len(p) {
				break
			}
			if b := p[i]; b >= 0x80 && utf8.FullRune(p[i:]) {
				r, n := utf8.DecodeRune(p[i:])
				out = g.rune(out, p[i:i+n], r, n)
				i += n
				continue
			}
		} else if g.st == stCSI && !g.bad {
			// A CSI's parameters, collected in one go.
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] <= 0x3f && len(g.seq)+j-i < maxSeq {
				j++
			}
			g.seq = append(g.seq, p[i:j]...)
			i = j
			if i == len(p) {
				break
			}
		}
		out = g.step(out, p[i])
		i++
	}
	return out
}

// rune keeps a decoded rune unless it is invalid or a C1 control (U+0080
// to U+009F): some terminals act on C1 controls encoded in UTF-8.
func (g *Guard) rune(out, enc []byte, r rune, n int) []byte {
	if r == utf8.RuneError && n == 1 || r >= 0x80 && r <= 0x9f {
		return out
	}
	return append(out, enc...)
}

// step feeds one byte outside the printable fast path.
func (g *Guard) step(out []byte, b byte) []byte {
	switch g.st {
	case stGround:
		return g.ground(out, b)
	case stUTF8:
		g.seq = append(g.seq, b)
		if !utf8.FullRune(g.seq) {
			return out
		}
		r, n := utf8.DecodeRune(g.seq)
		rest := append([]byte(nil), g.seq[n:]...)
		out = g.rune(out, g.seq[:n], r, n)
		g.reset()
		for _, c := range rest { // at most 3 bytes: after an invalid lead
			out = g.step(out, c)
		}
		return out
	case stEsc:
		return g.esc(out, b)
	case stCSI:
		return g.csi(out, b)
	case stOSC:
		return g.osc(out, b)
	case stOSCEsc:
		if b == '\\' {
			return g.endOSC(out)
		}
		g.begin(stEsc)
		return g.esc(out, b)
	case stStr:
		switch b {
		case 0x1b:
			g.st = stStrEsc
		case 0x18, 0x1a:
			g.reset()
		}
		return out
	case stStrEsc:
		if b == '\\' {
			g.reset()
			return out
		}
		g.begin(stEsc)
		return g.esc(out, b)
	}
	return out
}

func (g *Guard) reset() {
	g.st, g.seq, g.bad = stGround, g.seq[:0], false
}

func (g *Guard) begin(s state) {
	g.st, g.seq, g.bad = s, append(g.seq[:0], 0x1b), false
}

// keptC0 are the C0 controls tmux draws with: BEL, BS, HT, LF, CR, SO, SI.
var keptC0 = [32]bool{0x07: true, 0x08: true, 0x09: true, 0x0a: true, 0x0d: true, 0x0e: true, 0x0f: true}

func (g *Guard) ground(out []byte, b byte) []byte {
	switch {
	case b >= 0x20 && b < 0x7f:
		out = append(out, b)
	case b == 0x1b:
		g.begin(stEsc)
	case b < 0x20:
		if keptC0[b] {
			out = append(out, b)
		}
	case b >= 0x80: // a rune cut by the end of a write
		g.st, g.seq, g.bad = stUTF8, append(g.seq[:0], b), false
	}
	return out // DEL and the other C0 controls (ENQ among them) are dropped
}

// abort drops the sequence being collected and reads b afresh: a control
// inside a sequence ends it here, and what follows is plain text.
func (g *Guard) abort(out []byte, b byte) []byte {
	g.reset()
	switch b {
	case 0x18, 0x1a: // CAN, SUB: cancel and are themselves dropped
		return out
	}
	return g.ground(out, b)
}

func (g *Guard) esc(out []byte, b byte) []byte {
	switch {
	case b >= 0x20 && b <= 0x2f:
		if len(g.seq) >= 4 {
			g.bad = true
		} else {
			g.seq = append(g.seq, b)
		}
	case len(g.seq) == 1 && b == '[':
		g.seq, g.st = append(g.seq, b), stCSI
	case len(g.seq) == 1 && b == ']':
		g.seq, g.st = append(g.seq, b), stOSC
	case len(g.seq) == 1 && (b == 'P' || b == 'X' || b == '^' || b == '_'):
		g.st = stStr
	case b >= 0x30 && b <= 0x7e:
		if !g.bad && keepEsc(g.seq[1:], b) {
			out = append(append(out, g.seq...), b)
			switch b {
			case '7':
				g.saved = true
			case '8', 'c':
				g.saved = false
			}
		}
		g.reset()
	case b == 0x1b:
		g.begin(stEsc)
	default:
		out = g.abort(out, b)
	}
	return out
}

// keepEsc: the escape sequences (not CSI) tmux draws with.
func keepEsc(inter []byte, final byte) bool {
	switch len(inter) {
	case 0:
		switch final {
		case '7', '8', // DECSC, DECRC
			'=', '>', // keypad modes
			'D', 'E', 'H', 'M', // IND, NEL, HTS, RI
			'c': // RIS
			return true
		}
	case 1:
		switch inter[0] {
		case '(', ')', '*', '+': // designate G0-G3
			return final == '0' || final == 'A' || final == 'B'
		}
	}
	return false // DECID (ESC Z), ESC % (coding system), SS2/SS3, ...
}

func (g *Guard) csi(out []byte, b byte) []byte {
	switch {
	case b >= 0x20 && b <= 0x3f:
		if len(g.seq) >= maxSeq {
			g.bad = true
		} else {
			g.seq = append(g.seq, b)
		}
	case b >= 0x40 && b <= 0x7e:
		if !g.bad && keepCSI(g.seq[2:], b) {
			out = append(append(out, g.seq...), b)
			if (b == 'h' || b == 'l') && len(g.seq) > 2 && g.seq[2] == '?' && altMode(g.seq[3:]) {
				g.alt, g.sawAlt = b == 'h', true
			}
			if len(g.seq) == 2 {
				switch b {
				case 's':
					g.saved = true
				case 'u':
					g.saved = false
				}
			}
		}
		g.reset()
	case b == 0x1b:
		g.begin(stEsc)
	default:
		out = g.abort(out, b)
	}
	return out
}

func (g *Guard) osc(out []byte, b byte) []byte {
	switch b {
	case 0x07:
		return g.endOSC(out)
	case 0x1b:
		g.st = stOSCEsc
	case 0x18, 0x1a:
		g.reset()
	default:
		if len(g.seq) >= maxOSC+2 {
			g.bad = true
		} else {
			g.seq = append(g.seq, b)
		}
	}
	return out
}

func (g *Guard) endOSC(out []byte) []byte {
	if !g.bad {
		out = keepOSC(out, g.seq[2:])
	}
	g.reset()
	return out
}
