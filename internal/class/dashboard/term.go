package dashboard

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Run is a stretch of one line's text in one style. Class names only
// classes of the page's own style sheet (f0..f255, b0..b255, bold, dim,
// it, ul, rev), made here from numbers: no byte of a student's text ever
// reaches a class or an attribute. Text goes into the page as text.
type Run struct {
	Text  string `json:"t"`
	Class string `json:"c,omitempty"`
}

// style is the SGR state while a line is read.
type style struct {
	fg, bg                 int // -1: default
	bold, dim, it, ul, rev bool
}

func (s style) class() string {
	var c []string
	if s.fg >= 0 {
		c = append(c, "f"+strconv.Itoa(s.fg))
	}
	if s.bg >= 0 {
		c = append(c, "b"+strconv.Itoa(s.bg))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{s.bold, "bold"}, {s.dim, "dim"}, {s.it, "it"}, {s.ul, "ul"}, {s.rev, "rev"}} {
		if f.on {
			c = append(c, f.name)
		}
	}
	return strings.Join(c, " ")
}

// Screen turns a pane's text (with SGR colour sequences, as pane_capture
// sends it with escapes=true) into lines of styled runs. Every other
// escape sequence and control character is dropped, invalid UTF-8 becomes
// U+FFFD, and at most maxLines lines of maxCols runes are kept (the last
// lines: the bottom of a screen is where the prompt is).
func Screen(text string, maxLines, maxCols int) [][]Run {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.TrimRight(text, "\n")
	raw := strings.Split(text, "\n")
	if len(raw) > maxLines {
		raw = raw[len(raw)-maxLines:]
	}
	out := make([][]Run, 0, len(raw))
	st := style{fg: -1, bg: -1}
	for _, l := range raw {
		var line []Run
		line, st = parseLine(l, st, maxCols)
		out = append(out, line)
	}
	return out
}

// parseLine reads one line from style st; it returns the style at its end
// (tmux carries a colour over to the next line).
func parseLine(l string, st style, maxCols int) ([]Run, style) {
	var runs []Run
	var b strings.Builder
	cols := 0
	flush := func() {
		if b.Len() > 0 {
			runs = append(runs, Run{Text: b.String(), Class: st.class()})
			b.Reset()
		}
	}
	for i := 0; i < len(l); {
		c := l[i]
		if c == 0x1b {
			n, params, final := escape(l[i:])
			if final == 'm' {
				flush()
				st = sgr(st, params)
			}
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(l[i:])
		i += size
		switch {
		case r == '\t':
			r = ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			continue // C0 and C1 controls: never shown
		case r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069'):
			continue // line breaks and bidi overrides that would reorder the tile
		}
		if cols >= maxCols {
			continue
		}
		cols++
		b.WriteRune(r)
	}
	flush()
	return runs, st
}

// escape measures the escape sequence at the start of s: its length, and
// for a CSI sequence its parameters and final byte.
func escape(s string) (n int, params string, final byte) {
	if len(s) < 2 {
		return len(s), "", 0
	}
	switch s[1] {
	case '[':
		for j := 2; j < len(s); j++ {
			if s[j] >= 0x40 && s[j] <= 0x7e {
				return j + 1, s[2:j], s[j]
			}
		}
		return len(s), "", 0
	case ']', 'P', '_', '^', 'X':
		// OSC, DCS and friends run to BEL or ST.
		for j := 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j + 1, "", 0
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 2, "", 0
			}
		}
		return len(s), "", 0
	default:
		return 2, "", 0
	}
}

// sgr applies one "ESC [ params m".
func sgr(st style, params string) style {
	if params == "" {
		params = "0"
	}
	f := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	num := func(i int) int {
		if i >= len(f) {
			return -1
		}
		v, err := strconv.Atoi(f[i])
		if err != nil || v > 255 {
			return -1
		}
		return v
	}
	for i := 0; i < len(f); i++ {
		switch v := num(i); {
		case v == 0:
			st = style{fg: -1, bg: -1}
		case v == 1:
			st.bold = true
		case v == 2:
			st.dim = true
		case v == 3:
			st.it = true
		case v == 4:
			st.ul = true
		case v == 7:
			st.rev = true
		case v == 22:
			st.bold, st.dim = false, false
		case v == 23:
			st.it = false
		case v == 24:
			st.ul = false
		case v == 27:
			st.rev = false
		case v >= 30 && v <= 37:
			st.fg = v - 30
		case v == 39:
			st.fg = -1
		case v >= 40 && v <= 47:
			st.bg = v - 40
		case v == 49:
			st.bg = -1
		case v >= 90 && v <= 97:
			st.fg = v - 90 + 8
		case v >= 100 && v <= 107:
			st.bg = v - 100 + 8
		case v == 38 || v == 48:
			c := -1
			switch num(i + 1) {
			case 5:
				c = num(i + 2)
				i += 2
			case 2:
				r, g, b := num(i+2), num(i+3), num(i+4)
				if r >= 0 && g >= 0 && b >= 0 {
					c = cube(r, g, b)
				}
				i += 4
			}
			if c >= 0 {
				if v == 38 {
					st.fg = c
				} else {
					st.bg = c
				}
			}
		}
	}
	return st
}

// cube maps a 24-bit colour to the nearest of xterm's 6x6x6 colour cube,
// so every colour is one of the style sheet's 256 classes.
func cube(r, g, b int) int {
	q := func(v int) int {
		if v < 48 {
			return 0
		}
		if v < 115 {
			return 1
		}
		return (v - 35) / 40
	}
	return 16 + 36*q(r) + 6*q(g) + q(b)
}

// PlainText is a screen's text without styles (for tests and the filter).
func PlainText(lines [][]Run) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, r := range l {
			b.WriteString(r.Text)
		}
	}
	return b.String()
}
