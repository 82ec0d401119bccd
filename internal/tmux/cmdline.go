package tmux

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The shell integration's marks carry no command text: C says that a line
// was accepted, not which. What bash wrote between the prompt mark (A) and
// C is the prompt followed by readline's echo of the line, so cmdLine
// renders that stretch of output the way a terminal would and reads the
// line back from it.
//
// Where the prompt ends is not marked either. bash draws the prompt in one
// write before readline reads a key, so the prompt is what the first output
// after A that shows any text (one %output, one read of tmux's) left on the
// screen; typing arrives in later reads. When that does not hold (keys
// typed ahead, tmux merging reads of a busy pane) the prompt taken holds
// some of the typing and the line read back is shorter than the one typed:
// it fails to match instead of matching something else.
//
// Only the controls readline uses to echo and edit a line are rendered
// (BS, CR, LF, TAB, cursor left/right/column, erase to end of line, delete
// and insert characters, insert mode; colours and private modes are
// skipped). Anything else, a continuation prompt (PS2), or a line that
// ends anywhere but on the prompt's row makes the line unknown: never a
// guess.

const (
	cmdMaxRows = 16
	cmdMaxCols = 4096
)

type cmdLine struct {
	active  bool // a prompt mark was seen, no command mark yet
	unknown bool

	rows     [][]rune
	row, col int
	insert   bool // IRM (CSI 4 h)

	// The prompt: the row and column where the first output after A that
	// wrote text left the cursor, and the cells before it then.
	promptSet bool
	promptRow int
	prompt    []rune
	wrote     bool // text was written in the current chunk

	esc  int // 0 ground, 1 ESC, 2 CSI, 3 string (OSC, DCS, ...), 4 ESC in string, 5 ESC + intermediate
	csi  []byte
	utf8 []byte
}

// reset starts a new prompt (mark A).
func (l *cmdLine) reset() {
	*l = cmdLine{active: true, rows: [][]rune{nil}, esc: l.esc, csi: l.csi[:0], utf8: l.utf8[:0]}
}

// fail makes the current line unknown.
func (l *cmdLine) fail() { l.unknown = true }

// endChunk runs after each %output payload: the first one after A that
// wrote text ends the prompt.
func (l *cmdLine) endChunk() {
	if l.active && !l.unknown && !l.promptSet && l.wrote {
		l.promptSet, l.promptRow = true, l.row
		r := l.rows[l.row]
		l.prompt = append([]rune(nil), r[:min(l.col, len(r))]...)
	}
	l.wrote = false
}

// accepted is mark C: the line typed after the prompt, or "" and false.
func (l *cmdLine) accepted() (string, bool) {
	defer func() { l.active = false }()
	if !l.active || l.unknown || !l.promptSet || l.row != l.promptRow+1 ||
		strings.TrimSpace(string(l.rows[l.row])) != "" {
		return "", false
	}
	r := l.rows[l.promptRow]
	if len(r) < len(l.prompt) || string(r[:len(l.prompt)]) != string(l.prompt) {
		return "", false
	}
	line := strings.TrimSpace(string(r[len(l.prompt):]))
	return line, line != ""
}

// byte renders one byte of output.
func (l *cmdLine) byte(b byte) {
	switch l.esc {
	case 1:
		l.escape(b)
		return
	case 2:
		if b >= 0x40 && b <= 0x7e {
			l.esc = 0
			l.csiDone(b)
		} else if len(l.csi) < 32 {
			l.csi = append(l.csi, b)
		} else {
			l.fail()
		}
		return
	case 3:
		switch b {
		case 0x07, 0x18, 0x1a:
			l.esc = 0
		case 0x1b:
			l.esc = 4
		}
		return
	case 4:
		if b == '\\' {
			l.esc = 0
			return
		}
		l.esc = 1
		l.escape(b)
		return
	case 5:
		l.esc = 0 // the charset's final byte
		return
	}
	if !l.active {
		return
	}
	if len(l.utf8) > 0 || b >= 0x80 {
		l.utf8 = append(l.utf8, b)
		if utf8.FullRune(l.utf8) || len(l.utf8) >= utf8.UTFMax {
			r, _ := utf8.DecodeRune(l.utf8)
			l.utf8 = l.utf8[:0]
			l.put(r)
		}
		return
	}
	switch {
	case b == 0x1b:
		l.esc = 1
	case b >= 0x20 && b < 0x7f:
		l.put(rune(b))
	case b == '\r':
		l.col = 0
	case b == '\n':
		l.row++
		if l.row >= cmdMaxRows {
			l.fail()
			l.row = cmdMaxRows - 1
		}
		for len(l.rows) <= l.row {
			l.rows = append(l.rows, nil)
		}
	case b == '\b':
		l.col = max(l.col-1, 0)
	case b == '\t':
		l.move((l.col/8 + 1) * 8)
	case b == 0x07: // the bell readline rings
	default:
		l.fail()
	}
}

func (l *cmdLine) escape(b byte) {
	l.esc = 0
	switch b {
	case '[':
		l.esc, l.csi = 2, l.csi[:0]
	case ']', 'P', 'X', '^', '_':
		l.esc = 3
	case '(', ')', '*', '+':
		l.esc = 5
	case '=', '>': // keypad modes
	case 0x1b:
		l.esc = 1
	default:
		if l.active {
			l.fail()
		}
	}
}

func (l *cmdLine) csiDone(final byte) {
	if !l.active {
		return
	}
	p := string(l.csi)
	if final == 'm' || strings.HasPrefix(p, "?") && (final == 'h' || final == 'l') {
		return // colours, private modes (bracketed paste, keypad, ...)
	}
	n := 1
	if p != "" {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > cmdMaxCols {
			l.fail()
			return
		}
		n = v
	}
	r := l.rows[l.row]
	switch final {
	case 'K':
		if p != "" && p != "0" {
			l.fail()
			return
		}
		if l.col < len(r) {
			l.rows[l.row] = r[:l.col]
		}
	case 'C':
		l.move(l.col + max(n, 1))
	case 'D':
		l.col = max(l.col-max(n, 1), 0)
	case 'G':
		l.move(max(n, 1) - 1)
	case 'P':
		if l.col < len(r) {
			k := min(max(n, 1), len(r)-l.col)
			l.rows[l.row] = append(r[:l.col], r[l.col+k:]...)
		}
	case '@':
		if l.col < len(r) {
			k := max(n, 1)
			if len(r)+k > cmdMaxCols {
				l.fail()
				return
			}
			blanks := []rune(strings.Repeat(" ", k))
			l.rows[l.row] = append(r[:l.col], append(blanks, r[l.col:]...)...)
		}
	case 'h', 'l':
		if p != "4" {
			l.fail()
			return
		}
		l.insert = final == 'h'
	default:
		l.fail()
	}
}

func (l *cmdLine) move(col int) {
	if col >= cmdMaxCols {
		l.fail()
		return
	}
	l.col = col
}

// put writes r at the cursor (inserting in insert mode) and advances it.
func (l *cmdLine) put(r rune) {
	if l.col >= cmdMaxCols || len(l.rows[l.row]) >= cmdMaxCols {
		l.fail()
		return
	}
	row := l.rows[l.row]
	for len(row) < l.col {
		row = append(row, ' ')
	}
	switch {
	case l.col == len(row):
		row = append(row, r)
	case l.insert:
		row = append(row[:l.col], append([]rune{r}, row[l.col:]...)...)
	default:
		row[l.col] = r
	}
	l.rows[l.row] = row
	l.col++
	l.wrote = true
}
