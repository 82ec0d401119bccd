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
}

// CaptureResult is a pane's text, sanitized with termtext (no control or
// escape sequences except SGR when asked for, valid UTF-8) and with
// trailing blank lines removed.
type CaptureResult struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
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
	out, err := c.command(ctx, cmd)
	if err != nil {
		return CaptureResult{}, fmt.Errorf("tmux: capture %s: %w", pane, err)
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
	res := CaptureResult{Text: text}
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
