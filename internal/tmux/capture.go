package tmux

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/termtext"
)

// LineRange selects lines as tmux numbers them: 0 is the top line of the
// visible screen, negative numbers reach into the scrollback (-1 is the
// newest history line). Out-of-range values are clamped by tmux.
type LineRange struct {
	Start, End int
}

// CaptureOptions select what Capture returns.
type CaptureOptions struct {
	// Range selects lines; nil means the visible screen.
	Range *LineRange
	// Scrollback captures the whole history and the screen (ignores Range).
	Scrollback bool
	// Join joins lines the terminal wrapped (capture-pane -J).
	Join bool
	// Escapes keeps colours and attributes as SGR escape sequences
	// (capture-pane -e); all other sequences are still removed.
	Escapes bool
	// MaxBytes caps Text, keeping the end (the newest lines), cut at a line
	// boundary when one is near; default 1 MiB.
	MaxBytes int
	// Position also reports the pane's history size, cursor row and height,
	// in the same round trip.
	Position bool
}

// CaptureResult is a pane's text, sanitized with termtext (no control or
// escape sequences except SGR when asked for, valid UTF-8) and with
// trailing blank lines removed.
type CaptureResult struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	// Position is filled when CaptureOptions.Position is set.
	Position *Position `json:"position,omitempty"`
}

// Position is where a pane's screen sits in its history, read in the same
// request as a capture (so the two agree).
type Position struct {
	HistorySize int `json:"history_size"`
	CursorY     int `json:"cursor_y"`
	Height      int `json:"height"`
	// HistoryLimit is the pane's history-limit: once HistorySize reaches
	// it tmux drops the oldest lines, and line positions move.
	HistoryLimit int `json:"history_limit"`
}

// positionFormat prints a Position (trusted numbers only).
const positionFormat = "#{history_size} #{cursor_y} #{pane_height} #{history_limit}"

// positionArg is positionFormat quoted for a command line.
var positionArg = mustQuote(positionFormat)

// parsePosition reads positionFormat's output: four decimal numbers, one
// space apart. It is on every capture's path, so without fmt's scanner.
func parsePosition(s string) (Position, error) {
	var f [4]int
	rest := s
	for i := range f {
		field, tail, more := strings.Cut(rest, " ")
		if more != (i < len(f)-1) {
			return Position{}, fmt.Errorf("%w: pane position %q", ErrProtocol, s)
		}
		n, err := strconv.Atoi(field)
		if err != nil {
			return Position{}, fmt.Errorf("%w: pane position %q", ErrProtocol, s)
		}
		f[i], rest = n, tail
	}
	return Position{HistorySize: f[0], CursorY: f[1], Height: f[2], HistoryLimit: f[3]}, nil
}

const defaultCaptureMax = 1 << 20

// Capture returns the text of a pane.
func (c *Client) Capture(ctx context.Context, pane PaneID, opt CaptureOptions) (CaptureResult, error) {
	if err := pane.check(); err != nil {
		return CaptureResult{}, err
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = defaultCaptureMax
	}
	cmd := "capture-pane -p -t " + string(pane)
	if opt.Join {
		cmd += " -J"
	}
	if opt.Escapes {
		cmd += " -e"
	}
	switch {
	case opt.Scrollback:
		cmd += " -S - -E -"
	case opt.Range != nil:
		cmd += " -S " + strconv.Itoa(opt.Range.Start) + " -E " + strconv.Itoa(opt.Range.End)
	}
	var pos *Position
	var out string
	if opt.Position {
		// The position (trusted numbers) first: only the last command of a
		// request may print pane text (see exec).
		outs, err := c.exec(ctx, "display-message -p -t "+string(pane)+" "+positionArg, cmd)
		if err != nil {
			return CaptureResult{}, fmt.Errorf("tmux: capture %s: %w", pane, err)
		}
		p, err := parsePosition(outs[0])
		if err != nil {
			return CaptureResult{}, err
		}
		pos, out = &p, outs[1]
	} else {
		var err error
		out, err = c.command(ctx, cmd)
		if err != nil {
			return CaptureResult{}, fmt.Errorf("tmux: capture %s: %w", pane, err)
		}
	}
	text, _ := termtext.Sanitize([]byte(out), termtext.Options{KeepSGR: opt.Escapes})
	if opt.Join {
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		text = strings.Join(lines, "\n")
	}
	text = strings.TrimRight(text, "\n")
	res := CaptureResult{Text: text, Position: pos}
	if len(text) > opt.MaxBytes {
		res.Text, res.Truncated = tail(text, opt.MaxBytes), true
	}
	return res, nil
}

// tail returns at most max bytes from the end of s, starting at a rune
// boundary and, if there is a line break in the first quarter, after it.
func tail(s string, max int) string {
	t := s[len(s)-max:]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	if i := strings.IndexByte(t, '\n'); i >= 0 && i < len(t)/4 {
		t = t[i+1:]
	}
	return t
}

// PanePosition reads a pane's history size, cursor row, height and history
// limit (one
// trusted display-message; cheaper than PaneInfo).
func (c *Client) PanePosition(ctx context.Context, pane PaneID) (Position, error) {
	if err := pane.check(); err != nil {
		return Position{}, err
	}
	out, err := c.command(ctx, "display-message -p -t "+string(pane)+" "+positionArg)
	if err != nil {
		return Position{}, fmt.Errorf("tmux: position of %s: %w", pane, err)
	}
	return parsePosition(out)
}
