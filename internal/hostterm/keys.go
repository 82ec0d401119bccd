package hostterm

import (
	"bytes"
	"io"
)

// The answer chord: Ctrl-] alone in one read of the real terminal, then
// the answer key alone in a later read. Typing does not produce it: a
// typed letter never arms it, a paste arrives as one read of many bytes
// (or inside bracketed-paste markers), and a key pressed while no
// question is pending goes to the container. Only this terminal's input
// reaches here; a client or program in the container has no way in.
const (
	chordKey = 0x1d // Ctrl-]
	escKey   = 0x1b
)

type keyState uint8

const (
	idle keyState = iota
	armed
	confirming // While chosen: asks once more
)

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// Input wraps the real terminal's input: what it returns goes to the
// container. Each read of in is judged whole, so in must be the terminal
// itself (one read, one burst of keys).
func (r *Relay) Input(in io.Reader) io.Reader {
	if !r.line {
		return in
	}
	return &inputReader{r: r, in: in, buf: make([]byte, 32<<10)}
}

type inputReader struct {
	r    *Relay
	in   io.Reader
	buf  []byte
	left []byte // forwarded bytes the caller's buffer had no room for
}

func (ir *inputReader) Read(p []byte) (int, error) {
	for len(ir.left) == 0 {
		n, err := ir.in.Read(ir.buf)
		if n > 0 {
			ir.left = ir.r.key(ir.buf[:n])
		}
		if err != nil && len(ir.left) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, ir.left)
	ir.left = ir.left[n:]
	return n, nil
}

// key judges one read of the terminal and returns what goes on to the
// container: all of it, or nothing when it was part of the chord.
func (r *Relay) key(chunk []byte) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasPaste := r.inPaste
	r.trackPaste(chunk)
	single := len(chunk) == 1 && !wasPaste && !r.inPaste
	var c byte
	if single {
		c = chunk[0]
	}
	switch r.state {
	case idle:
		if c == chordKey && len(r.pending) > 0 {
			r.state, r.armed, r.note = armed, r.pending[0], ""
			r.redraw()
			return nil
		}
		return chunk
	case armed:
		switch {
		case c == 'y' && r.armed.offers(Yes):
			r.answer(Yes)
		case c == 'n' && r.armed.offers(No):
			r.answer(No)
		case c == 'a' && r.armed.offers(While):
			r.state = confirming
			r.redraw()
		case c == escKey:
			r.state, r.note = idle, ""
			r.redraw()
		default:
			r.state, r.note = idle, ""
			r.redraw()
			return chunk
		}
		return nil
	case confirming:
		switch c {
		case 'y':
			r.answer(While)
		case escKey, 'n':
			r.state, r.note = idle, ""
			r.redraw()
		default:
			r.state, r.note = idle, ""
			r.redraw()
			return chunk
		}
		return nil
	}
	return chunk
}

// answer sends the armed question's answer. Called with r.mu held: the
// spool's Answer is one small file written, and holding the lock keeps a
// second chord from racing the first.
func (r *Relay) answer(c Choice) {
	q := r.armed
	r.state = idle
	if err := r.qs.Answer(q.ID, c); err != nil {
		r.note = "not answered: " + clean(err.Error())
	} else {
		r.note = "answered " + string(c) + " to " + clean(q.From)
		// Shown at once; the spool's next list confirms it.
		r.pending = without(r.pending, q.ID)
	}
	r.redraw()
}

func without(qs []Question, id string) []Question {
	out := make([]Question, 0, len(qs))
	for _, q := range qs {
		if q.ID != id {
			out = append(out, q)
		}
	}
	return out
}

// trackPaste follows bracketed-paste markers across reads.
func (r *Relay) trackPaste(chunk []byte) {
	look := append(r.tail, chunk...)
	s, e := bytes.LastIndex(look, pasteStart), bytes.LastIndex(look, pasteEnd)
	switch {
	case s > e:
		r.inPaste = true
	case e > s:
		r.inPaste = false
	}
	k := len(look) - (len(pasteStart) - 1)
	if k < 0 {
		k = 0
	}
	r.tail = append(r.tail[:0:0], look[k:]...)
}
