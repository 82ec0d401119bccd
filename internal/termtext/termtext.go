// Package termtext turns untrusted terminal text into plain text that is safe
// to put in a JSON result, show to a model, print on a terminal or write to
// a log. It is stem's one sanitizer for text a container controls: pane
// output, server errors, pane titles, buffer and file names, manifest
// values (Line for one-line uses, Logf for libraries' loggers).
//
// A student's program can print anything: escape sequences that move the
// cursor, set the window title, write the clipboard (OSC 52), hide text, or
// smuggle bytes that are not UTF-8. Sanitize removes every CSI, OSC, DCS, SOS,
// PM and APC sequence (7-bit ESC forms and the 8-bit C1 introducers), every
// other escape sequence, every C0 and C1 control except '\n' and '\t', DEL,
// and Unicode bidirectional overrides and isolates (they make text read
// differently from what it is). "\r\n" becomes "\n"; invalid UTF-8 becomes
// U+FFFD. SGR (colour) sequences survive only with Options.KeepSGR.
//
// The work is one pass over the input: every byte is looked at a bounded
// number of times, whatever the input, and the output is at most three bytes
// per input byte (an invalid byte becomes the three-byte U+FFFD), or
// Options.MaxBytes when that is set.
package termtext

import (
	"strings"
	"unicode/utf8"
)

// Options select what Sanitize keeps.
type Options struct {
	// KeepSGR keeps Select Graphic Rendition sequences (ESC [ params m) whose
	// parameters are only digits, ';' and ':' and at most maxSGRParams bytes
	// long; they are re-emitted in the 7-bit form. Everything else is still
	// removed.
	KeepSGR bool
	// Overstrike applies a lone '\r' (return to column 0) and '\b' (one
	// column left) the way a terminal would within a line, so a progress bar
	// that redraws itself leaves only its last state. Without it a lone '\r'
	// becomes '\n' (nothing is hidden) and '\b' is dropped.
	Overstrike bool
	// MaxBytes caps the output (0: no cap). The output is cut at a rune
	// boundary and Sanitize reports that it truncated.
	MaxBytes int
}

// maxSGRParams bounds a kept SGR sequence; longer ones are dropped.
const maxSGRParams = 64

// String sanitizes s with the default options.
func String(s string) string {
	out, _ := Sanitize([]byte(s), Options{})
	return out
}

// OneLine is s for a one-line message of at most max bytes (0: any
// length): sanitized as String does, every run of white space (newlines
// included) one space, cut at a rune boundary with "…".
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(String(s)), " ")
	if max <= 0 {
		return s
	}
	return Clip(s, max)
}

// Sanitize returns the printable text of in and whether MaxBytes cut it.
func Sanitize(in []byte, opt Options) (string, bool) {
	w := writer{opt: opt}
	w.out.Grow(min(len(in), 1<<20))
	i := 0
	for i < len(in) && !w.full {
		b := in[i]
		switch {
		case b == 0x1b:
			i = w.escape(in, i)
			continue
		case b == '\r':
			if i+1 < len(in) && in[i+1] == '\n' {
				w.newline()
				i += 2
				continue
			}
			if opt.Overstrike {
				w.col = 0
			} else {
				w.newline()
			}
		case b == '\n':
			w.newline()
		case b == '\t':
			w.rune('\t', 1)
		case b == '\b':
			if opt.Overstrike && w.col > 0 {
				w.col--
			}
		case b < 0x20 || b == 0x7f:
			// Other C0 controls and DEL: dropped.
		case b < 0x80:
			if w.opt.Overstrike {
				w.rune(rune(b), 1)
				break
			}
			// Fast path: copy a run of printable ASCII at once.
			j := i + 1
			for j < len(in) && in[j] >= 0x20 && in[j] < 0x7f {
				j++
			}
			w.ascii(in[i:j])
			i = j
			continue
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				w.rune(utf8.RuneError, 3)
				i++
				continue
			}
			if r >= 0x80 && r <= 0x9f {
				i = w.c1(in, i, r, size)
				continue
			}
			if !isBidiControl(r) {
				w.rune(r, size)
			}
			i += size
			continue
		}
		i++
	}
	w.flush()
	return w.out.String(), w.full
}

// isBidiControl reports the Unicode bidirectional embedding, override and
// isolate controls (and LRM/RLM/ALM), which reorder how text displays.
func isBidiControl(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// escape consumes the escape sequence starting with ESC at in[i] and returns
// the index after it.
func (w *writer) escape(in []byte, i int) int {
	if i+1 >= len(in) {
		return i + 1
	}
	switch c := in[i+1]; {
	case c == '[':
		return w.csi(in, i+2)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return skipString(in, i+2)
	case c >= 0x20 && c <= 0x2f:
		// nF sequence: intermediates, then one final byte.
		j := i + 1
		for j < len(in) && in[j] >= 0x20 && in[j] <= 0x2f {
			j++
		}
		if j < len(in) && in[j] >= 0x30 && in[j] <= 0x7e {
			j++
		}
		return j
	case c >= 0x30 && c <= 0x7e:
		// Two-byte sequence (ESC 7, ESC =, ESC c, ...).
		return i + 2
	default:
		// A lone ESC before a control or non-ASCII byte.
		return i + 1
	}
}

// c1 handles a C1 control encoded as UTF-8 (U+0080..U+009F) at in[i]: the
// introducers start a sequence like their ESC forms, the rest are dropped.
func (w *writer) c1(in []byte, i int, r rune, size int) int {
	switch r {
	case 0x9b: // CSI
		return w.csi(in, i+size)
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f: // OSC, DCS, SOS, PM, APC
		return skipString(in, i+size)
	}
	return i + size
}

// csi consumes a control sequence whose parameters start at in[j].
func (w *writer) csi(in []byte, j int) int {
	start := j
	for j < len(in) && in[j] >= 0x30 && in[j] <= 0x3f {
		j++
	}
	params := in[start:j]
	inter := j
	for j < len(in) && in[j] >= 0x20 && in[j] <= 0x2f {
		j++
	}
	if j >= len(in) {
		return j
	}
	final := in[j]
	if final < 0x40 || final > 0x7e {
		// Malformed: drop what we have; the offending byte is processed
		// as ordinary input (a terminal executes C0 controls there too).
		return j
	}
	if w.opt.KeepSGR && final == 'm' && inter == j && len(params) <= maxSGRParams && sgrParams(params) {
		w.sgr(params)
	}
	return j + 1
}

func sgrParams(p []byte) bool {
	for _, c := range p {
		if !(c >= '0' && c <= '9' || c == ';' || c == ':') {
			return false
		}
	}
	return true
}

// skipString consumes a control string (OSC, DCS, SOS, PM, APC) whose body
// starts at in[j]. It ends at BEL, ST (ESC \ or U+009C), CAN or SUB; ESC
// followed by anything else aborts it and starts a new sequence. An
// unterminated string runs to the end of the input, as it would hide the rest
// of the output in a terminal.
func skipString(in []byte, j int) int {
	for j < len(in) {
		switch in[j] {
		case 0x07, 0x18, 0x1a:
			return j + 1
		case 0x1b:
			if j+1 < len(in) && in[j+1] == '\\' {
				return j + 2
			}
			return j
		case 0xc2:
			if j+1 < len(in) && in[j+1] == 0x9c {
				return j + 2
			}
		}
		j++
	}
	return j
}

// writer builds the output, either directly or, with Overstrike, through a
// buffer of the current line.
type writer struct {
	opt  Options
	out  strings.Builder
	full bool
	// Overstrike state: the cells of the current line and the cursor.
	line []cell
	col  int
	// size of the current line in output bytes, for MaxBytes.
	lineBytes int
}

type cell struct {
	sgr string // SGR sequences that precede the rune
	r   rune
}

func (w *writer) room(n int) bool {
	if w.full {
		return false
	}
	if w.opt.MaxBytes > 0 && w.out.Len()+w.lineBytes+n > w.opt.MaxBytes {
		w.full = true
		return false
	}
	return true
}

func (w *writer) rune(r rune, size int) {
	if !w.opt.Overstrike {
		if w.room(size) {
			w.out.WriteRune(r)
		}
		return
	}
	if w.col < len(w.line) {
		old := w.line[w.col]
		delta := size
		if old.r >= 0 {
			delta -= utf8.RuneLen(old.r)
		}
		if delta > 0 && !w.room(delta) {
			return
		}
		w.lineBytes += delta
		w.line[w.col].r = r
	} else {
		if !w.room(size) {
			return
		}
		w.lineBytes += size
		w.line = append(w.line, cell{r: r})
	}
	w.col++
}

// ascii writes printable ASCII (no overstrike), as much as MaxBytes allows.
func (w *writer) ascii(p []byte) {
	if w.full {
		return
	}
	if w.opt.MaxBytes > 0 && w.out.Len()+len(p) > w.opt.MaxBytes {
		p = p[:w.opt.MaxBytes-w.out.Len()]
		w.full = true
	}
	w.out.Write(p)
}

func (w *writer) sgr(params []byte) {
	seq := "\x1b[" + string(params) + "m"
	if !w.room(len(seq)) {
		return
	}
	if !w.opt.Overstrike {
		w.out.WriteString(seq)
		return
	}
	w.lineBytes += len(seq)
	if w.col < len(w.line) {
		w.line[w.col].sgr += seq
		return
	}
	w.line = append(w.line, cell{sgr: seq, r: -1})
}

func (w *writer) newline() {
	w.flush()
	if w.room(1) {
		w.out.WriteByte('\n')
	}
}

// flush writes the overstrike line buffer.
func (w *writer) flush() {
	for _, c := range w.line {
		w.out.WriteString(c.sgr)
		if c.r >= 0 {
			w.out.WriteRune(c.r)
		}
	}
	w.line = w.line[:0]
	w.col = 0
	w.lineBytes = 0
}
