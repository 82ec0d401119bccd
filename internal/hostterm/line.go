package hostterm

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/text/width"

	"github.com/stem-edu/stem/internal/termtext"
)

// lineText is what the host line says in the relay's present state.
func (r *Relay) lineText() string {
	if r.state != idle {
		q := r.armed
		if r.state == confirming {
			return fmt.Sprintf("stem ▸ allow everything %s asks for 10 min?  y confirm · Esc cancel", clean(q.From))
		}
		return fmt.Sprintf("stem ▸ answer %s: %s", clean(q.From), choiceKeys(q)+" · Esc cancel")
	}
	note := ""
	if r.note != "" {
		note = r.note + " · "
	}
	if len(r.pending) > 0 {
		q := r.pending[0]
		more := ""
		if n := len(r.pending); n > 1 {
			more = fmt.Sprintf(" (1 of %d)", n)
		}
		// Who is connected stays on the line, after what the student
		// must see to answer (a narrow terminal cuts it first).
		line := fmt.Sprintf("stem ▸ %s%s%s  [Ctrl-] then %s]", note, questionText(q), more, choiceKeys(q))
		if r.who != nil && len(r.with) > 0 {
			line += " · connected: " + clean(strings.Join(r.with, ", "))
		}
		return line
	}
	line := "stem ▸ " + note + clean(r.name)
	if r.who != nil {
		if len(r.with) == 0 {
			line += " · no agent or teacher connected"
		} else {
			line += " · connected: " + clean(strings.Join(r.with, ", "))
		}
	}
	if r.welcome != "" {
		line += " · " + clean(r.welcome)
	}
	return line
}

// questionText is the question, led by who asks unless it already is.
func questionText(q Question) string {
	from, text := clean(q.From), clean(q.Text)
	if from != "" && !strings.HasPrefix(text, from) {
		text = from + ": " + text
	}
	return text
}

func choiceKeys(q Question) string {
	var keys []string
	for _, c := range []struct {
		c    Choice
		text string
	}{{Yes, "y yes"}, {No, "n no"}, {While, "a allow all 10 min"}} {
		if q.offers(c.c) {
			keys = append(keys, c.text)
		}
	}
	return strings.Join(keys, " · ")
}

func clean(s string) string { return termtext.OneLine(s, 200) }

// lineBytes draws text on the terminal's last row: the cursor, its
// attributes, character set and origin mode are saved first (DECSC) and
// restored after (DECRC), so the stream carries on where it was. The text
// is cut to cols-1 columns and padded, so the last column never holds a
// pending wrap.
func lineBytes(text string, rows, cols int) []byte {
	b := make([]byte, 0, cols+48)
	b = append(b, "\x1b7\x1b[?6l\x1b(B\x0f\x1b[0;7m\x1b["...)
	b = strconv.AppendInt(b, int64(rows), 10)
	b = append(b, ";1H"...)
	w := 0
	for _, r := range text {
		rw := runeWidth(r)
		if w+rw > cols-1 {
			break
		}
		b = append(b, string(r)...)
		w += rw
	}
	for ; w < cols-1; w++ {
		b = append(b, ' ')
	}
	return append(b, "\x1b[0m\x1b[K\x1b8"...)
}

func runeWidth(r rune) int {
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}
