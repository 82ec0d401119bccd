package nvim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	gonvim "github.com/neovim/go-client/nvim"
)

// Assist-level operations. The caller has already checked that paths lie
// inside the card repository; this layer makes sure no path or text is ever
// interpreted by Neovim.

// MaxHintBytes bounds one hint's text.
const MaxHintBytes = 1000

// HintHighlight is the highlight group hints are drawn with (defined by
// Neovim 0.6+ and by colour schemes that support diagnostics).
const HintHighlight = "DiagnosticHint"

// Opened is the result of Open.
type Opened struct {
	Buffer int  `json:"buffer"`
	Name   Text `json:"name"`
	Lines  int  `json:"lines"`
	// New: the file did not exist; the buffer is empty and unsaved.
	New bool `json:"new"`
	// Swap: a swap file existed (another editor, or a crash); the buffer
	// was opened read-only rather than asking the student.
	Swap     bool `json:"swap,omitempty"`
	ReadOnly bool `json:"readonly"`
}

// Open loads the file at absPath as a listed buffer of the student's
// Neovim, if it is not one already, and leaves every window as it is: the
// student keeps their view and their unsaved buffers, and finds the file in
// :ls (:buffer N shows it). It uses bufadd()/bufload() only, so no
// character of the name (backtick, |, %, #, <cword>, $(...), space,
// newline) is interpreted, and modelines in the file are not applied.
func (c *Client) Open(ctx context.Context, absPath string) (*Opened, error) {
	if !filepath.IsAbs(absPath) || filepath.Clean(absPath) != absPath {
		return nil, fmt.Errorf("nvim open %q: want a clean absolute path", absPath)
	}
	if strings.IndexByte(absPath, 0) >= 0 {
		return nil, fmt.Errorf("nvim open %q: path contains a NUL byte", absPath)
	}
	var res struct {
		Err      string `msgpack:"err"`
		Msg      string `msgpack:"msg"`
		Buf      int    `msgpack:"buf"`
		Name     string `msgpack:"name"`
		Lines    int    `msgpack:"lines"`
		New      bool   `msgpack:"new"`
		Swap     bool   `msgpack:"swap"`
		ReadOnly bool   `msgpack:"readonly"`
	}
	err := c.call(ctx, "open", guardInput, false, func(v *gonvim.Nvim) error {
		return execLua(v, fnOpen, &res, absPath)
	})
	if err != nil {
		return nil, err
	}
	switch res.Err {
	case "":
	case "directory":
		return nil, fmt.Errorf("nvim open %q: is a directory", absPath)
	case "open":
		return nil, fmt.Errorf("nvim open %q (buffer %d): %s", absPath, res.Buf, res.Msg)
	default:
		return nil, fmt.Errorf("nvim open %q: %s", absPath, res.Err)
	}
	return &Opened{Buffer: res.Buf, Name: makeText(res.Name), Lines: res.Lines, New: res.New, Swap: res.Swap, ReadOnly: res.ReadOnly}, nil
}

// Edited is the result of SetLines.
type Edited struct {
	Total int `json:"total"` // line count after the edit
	Tick  int `json:"tick"`  // b:changedtick after the edit
}

// SetLines replaces lines start..end (1-based, inclusive) of buffer buf with
// lines. end == start-1 inserts before start (start may be Total+1 to
// append); an empty lines deletes. Only normal file buffers ('buftype'
// empty) are edited: terminal, prompt, nofile and other special buffers are
// refused with ErrBufType. Lines may contain any bytes except newline.
func (c *Client) SetLines(ctx context.Context, buf, start, end int, lines []string) (*Edited, error) {
	return c.setLines(ctx, buf, start, end, lines, nil)
}

func (c *Client) setLines(ctx context.Context, buf, start, end int, lines []string, tick *int) (*Edited, error) {
	if buf < 1 {
		return nil, fmt.Errorf("nvim set lines: buffer number %d: must be 1 or more", buf)
	}
	for i, l := range lines {
		if strings.ContainsAny(l, "\n\r") {
			// '\r' would be kept literally and show as ^M; a caller sending
			// one almost certainly meant a line break.
			return nil, fmt.Errorf("nvim set lines: replacement line %d contains a line break; pass one string per line", i+1)
		}
	}
	if lines == nil {
		lines = []string{} // msgpack nil is not an array
	}
	var res struct {
		Err     string `msgpack:"err"`
		Buftype string `msgpack:"buftype"`
		Total   int    `msgpack:"total"`
		Tick    int    `msgpack:"tick"`
	}
	err := c.call(ctx, "set lines", guardInput, false, func(v *gonvim.Nvim) error {
		if tick != nil {
			return execLua(v, fnSetLines, &res, buf, start, end, lines, *tick)
		}
		return execLua(v, fnSetLines, &res, buf, start, end, lines)
	})
	if err != nil {
		return nil, err
	}
	ref := Buf(buf).String()
	switch res.Err {
	case "":
	case "buftype":
		return nil, fmt.Errorf("nvim set lines: %s has buftype %q: %w", ref, res.Buftype, ErrBufType)
	case "tick":
		if tick == nil {
			// Only a server that is not stem's chunk answers so.
			return nil, fmt.Errorf("nvim set lines: %s: an answer about a changedtick that was not given", ref)
		}
		return nil, fmt.Errorf("nvim set lines: %s changed (changedtick %d, not %d): %w", ref, res.Tick, *tick, ErrTickChanged)
	case "nomodifiable":
		return nil, fmt.Errorf("nvim set lines: %s is not modifiable ('nomodifiable')", ref)
	case "range":
		return nil, fmt.Errorf("nvim set lines: %s has %d lines; lines %d..%d cannot be replaced (start 1..%d, end start-1..%d)",
			ref, res.Total, start, end, res.Total+1, res.Total)
	default:
		return nil, fmt.Errorf("nvim set lines: %w", mapErr(res.Err, ref))
	}
	return &Edited{Total: res.Total, Tick: res.Tick}, nil
}

// cleanHint makes hint text one displayable line: control characters
// (newlines, tabs, escape sequences) become spaces, invalid UTF-8 becomes
// U+FFFD.
func cleanHint(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// maxHintWho bounds the author's name in a hint's label.
const maxHintWho = 60

// Hint shows text, labelled "hint from WHO: ", at line (1-based) of buffer
// buf, in the "stem-hint" namespace, and returns the extmark id: at the
// end of the line when it fits the window, else wrapped below the line.
// The buffer's text, 'modified' and changedtick are untouched.
func (c *Client) Hint(ctx context.Context, buf, line int, who, text string) (int, error) {
	if buf < 1 {
		return 0, fmt.Errorf("nvim hint: buffer number %d: must be 1 or more", buf)
	}
	if len(text) > MaxHintBytes {
		return 0, fmt.Errorf("nvim hint: text is %d bytes; at most %d", len(text), MaxHintBytes)
	}
	text = cleanHint(text)
	if strings.TrimSpace(text) == "" {
		return 0, errors.New("nvim hint: empty text")
	}
	var res struct {
		Err   string `msgpack:"err"`
		Total int    `msgpack:"total"`
		ID    int    `msgpack:"id"`
	}
	err := c.call(ctx, "hint", guardHang, false, func(v *gonvim.Nvim) error {
		return execLua(v, fnHint, &res, buf, line, text, HintHighlight, hintLabel(who))
	})
	if err != nil {
		return 0, err
	}
	ref := Buf(buf).String()
	switch res.Err {
	case "":
	case "range":
		return 0, fmt.Errorf("nvim hint: %s has %d lines; no line %s", ref, res.Total, strconv.Itoa(line))
	default:
		return 0, fmt.Errorf("nvim hint: %w", mapErr(res.Err, ref))
	}
	return res.ID, nil
}

// hintLabel names who gave a hint, as one clipped line.
func hintLabel(who string) string {
	who = strings.TrimSpace(cleanHint(who))
	if who == "" {
		return "hint: "
	}
	if len(who) > maxHintWho {
		who = strings.ToValidUTF8(who[:maxHintWho], "") + "…"
	}
	return "hint from " + who + ": "
}

// ClearHints removes every stem hint from buffer buf, or from all buffers
// when buf is 0, and reports how many there were.
func (c *Client) ClearHints(ctx context.Context, buf int) (int, error) {
	if buf < 0 {
		return 0, fmt.Errorf("nvim clear hints: buffer number %d: must be 0 (all) or more", buf)
	}
	var res struct {
		Err   string `msgpack:"err"`
		Count int    `msgpack:"count"`
	}
	err := c.call(ctx, "clear hints", guardHang, false, func(v *gonvim.Nvim) error {
		return execLua(v, fnClearHints, &res, buf)
	})
	if err != nil {
		return 0, err
	}
	if err := mapErr(res.Err, Buf(buf).String()); err != nil {
		return 0, fmt.Errorf("nvim clear hints: %w", err)
	}
	return res.Count, nil
}
