package nvim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/lib/swar"
)

// Limits on what one read returns.
const (
	// DefaultMaxBytes is ReadBuffer's budget when maxBytes <= 0.
	DefaultMaxBytes = 256 << 10
	// MaxBuffers caps the buffer list in Status.
	MaxBuffers = 500
	// MaxDiagnostics caps Diagnostics.
	MaxDiagnostics = 1000
)

// Text is untrusted text from Neovim (a line, a buffer name, a diagnostic
// message) made safe to put in JSON or a terminal-free log.
//
// S is always valid UTF-8 without terminal controls: each byte of an
// invalid sequence becomes U+FFFD, each C0 control other than tab becomes
// its control picture (NUL ␀, ESC ␛, CR ␍ ...), DEL becomes ␡, and C1
// controls and bidirectional overrides/isolates become U+FFFD, so the text
// can neither drive a terminal nor read differently from what it is. When
// that happened, Raw holds the exact original bytes (base64 in JSON), so
// nothing is lost and a literal U+FFFD or ␀ the student typed is not
// confused with a replacement.
type Text struct {
	S   string `json:"text"`
	Raw []byte `json:"raw,omitempty"`
}

func (t Text) String() string { return t.S }

// textReplacement returns what makeText writes for r, or -1 to keep it.
func textReplacement(r rune) rune {
	switch {
	case r == '\t':
		return -1
	case r < 0x20:
		return 0x2400 + r
	case r == 0x7f:
		return 0x2421
	case r >= 0x80 && r <= 0x9f,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x200e, r == 0x200f, r == 0x061c:
		return utf8.RuneError
	}
	return -1
}

// plainText reports whether s is printable ASCII (and tabs) or otherwise
// needs no change. Source code nearly always is, so runs of eight plain
// ASCII bytes are checked at a time.
func plainText(s string) bool { return plain(s, false) }

// plainLines is plainText for lines joined with newlines.
func plainLines(s string) bool { return plain(s, true) }

func plain(s string, newlines bool) bool {
	for i := 0; i < len(s); {
		if i+8 <= len(s) && unusual(swar.Load8(s, i)) == 0 {
			i += 8
			continue
		}
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || textReplacement(r) >= 0 {
				return false
			}
			i += size
			continue
		case c == '\t', c == '\n' && newlines:
		case c < 0x20, c == 0x7f:
			return false
		}
		i++
	}
	return true
}

// unusual is non-zero when a byte of w is below 0x20, DEL or not ASCII
// (tabs too: the byte loop sorts those out).
func unusual(w uint64) uint64 { return (swar.Below(w, 0x20) | swar.Has(w, 0x7f) | w) & swar.MSB }

func makeText(s string) Text {
	if plainText(s) {
		return Text{S: s}
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			b.WriteRune(utf8.RuneError)
		case textReplacement(r) >= 0:
			b.WriteRune(textReplacement(r))
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return Text{S: b.String(), Raw: []byte(s)}
}

// trimPartialRune drops an incomplete UTF-8 sequence that a byte cut left at
// the end of s, so a cut line does not end in a spurious U+FFFD.
func trimPartialRune(s string) string {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < 0x80 {
			return s // ASCII: nothing partial
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRuneInString(s[len(s)-k:]) {
				return s[:len(s)-k]
			}
			return s
		}
	}
	return s
}

// BufferRef names a buffer by number or by the absolute path of the file
// loaded in it. Exactly one field is set.
type BufferRef struct {
	Number int
	Path   string
}

// Buf refers to buffer n.
func Buf(n int) BufferRef { return BufferRef{Number: n} }

// File refers to the buffer holding the file at absolute path p.
func File(p string) BufferRef { return BufferRef{Path: p} }

// ParseBufferRef accepts a buffer number ("3") or an absolute path.
func ParseBufferRef(s string) (BufferRef, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return BufferRef{}, fmt.Errorf("buffer number %d: must be 1 or more", n)
		}
		return Buf(n), nil
	}
	if !filepath.IsAbs(s) {
		return BufferRef{}, fmt.Errorf("buffer reference %q: want a buffer number or an absolute path", s)
	}
	return File(s), nil
}

func (r BufferRef) String() string {
	if r.Path != "" {
		return strconv.Quote(r.Path)
	}
	return "buffer " + strconv.Itoa(r.Number)
}

func (r BufferRef) check() error {
	switch {
	case r.Path != "" && r.Number != 0:
		return errors.New("buffer reference has both a number and a path")
	case r.Path != "":
		if !filepath.IsAbs(r.Path) || strings.IndexByte(r.Path, 0) >= 0 {
			return fmt.Errorf("path %q: want an absolute path", r.Path)
		}
	case r.Number < 1:
		return fmt.Errorf("buffer number %d: must be 1 or more", r.Number)
	}
	return nil
}

// mapErr turns a chunk's {err = ...} code into a sentinel error.
func mapErr(code string, ref string) error {
	switch code {
	case "":
		return nil
	case "notloaded":
		return fmt.Errorf("%s: %w", ref, ErrNotLoaded)
	case "nobuffer":
		return fmt.Errorf("%s: %w", ref, ErrNoBuffer)
	default:
		return fmt.Errorf("%s: %s", ref, code)
	}
}

// Line is one buffer line. N is 1-based.
type Line struct {
	N int `json:"n"`
	Text
	// Cut: the line was longer than the byte budget and only its start is
	// here.
	Cut bool `json:"cut,omitempty"`
}

// BufferText is the result of ReadBuffer.
type BufferText struct {
	Buffer   int
	Name     Text
	Total    int  // lines in the buffer
	First    int  // number of the first line read
	Count    int  // lines read, consecutive from First
	Modified bool // unsaved changes: the disk copy differs
	// Truncated: the byte budget stopped the read before the range ended.
	Truncated bool
	// Cut: the one line read is only the start of a line longer than the
	// byte budget.
	Cut bool
	// Tick is b:changedtick at the time of the read.
	Tick int

	joined string // the lines as Neovim sent them, joined with "\n"
	plain  bool   // joined needs no cleaning
}

// Lines returns the lines read, each cleaned as Text describes.
func (bt *BufferText) Lines() []Line {
	if bt.Count == 0 {
		return nil
	}
	out := make([]Line, 0, bt.Count)
	rest := bt.joined
	for i := 0; i < bt.Count; i++ {
		l, after, _ := strings.Cut(rest, "\n")
		rest = after
		t := Text{S: l}
		if !bt.plain {
			t = makeText(l)
		}
		out = append(out, Line{N: bt.First + i, Text: t, Cut: bt.Cut})
	}
	return out
}

// SetText makes bt hold text (its Count lines joined with "\n") as
// ReadBuffer makes it of Neovim's answer: fakes of the client build their
// answers with it, and get the same cleaning.
func (bt *BufferText) SetText(text string) {
	bt.joined, bt.plain = text, plainLines(text)
}

// Joined returns the cleaned lines joined with "\n" (no final newline), in
// the usual case (nothing to clean) without copying them.
func (bt *BufferText) Joined() string {
	if bt.plain {
		return bt.joined
	}
	var b strings.Builder
	b.Grow(len(bt.joined) + 16)
	for i, l := range bt.Lines() {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.S)
	}
	return b.String()
}

// ReadBuffer returns lines start..end (1-based, inclusive; end <= 0 means
// the last line) of a loaded buffer, at most maxBytes of text (each line
// counting its length plus one; <= 0 means DefaultMaxBytes). The budget is
// applied inside Neovim, so a huge buffer is never sent whole. A file that
// is not loaded gives ErrNotLoaded: read it from disk instead.
//
// The lines stay one string until asked for: splitting a 1,000-line read
// into a slice of lines cost more than everything else stem-mcp does with it.
func (c *Client) ReadBuffer(ctx context.Context, ref BufferRef, start, end, maxBytes int) (*BufferText, error) {
	if err := ref.check(); err != nil {
		return nil, fmt.Errorf("nvim read: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	var res struct {
		Err       string `msgpack:"err"`
		Buf       int    `msgpack:"buf"`
		Name      string `msgpack:"name"`
		Total     int    `msgpack:"total"`
		First     int    `msgpack:"first"`
		Count     int    `msgpack:"count"`
		Text      string `msgpack:"text"`
		Truncated bool   `msgpack:"truncated"`
		Cut       bool   `msgpack:"cut"`
		Modified  bool   `msgpack:"modified"`
		Tick      int    `msgpack:"tick"`
	}
	err := c.call(ctx, "read", guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fnRead, &res, ref.Number, ref.Path, start, end, maxBytes)
	})
	if err != nil {
		return nil, err
	}
	if err := mapErr(res.Err, ref.String()); err != nil {
		return nil, fmt.Errorf("nvim read: %w", err)
	}
	// count-1 newlines join count lines; no lines is an empty text.
	if n := strings.Count(res.Text, "\n"); res.Count < 0 || res.Count == 0 && res.Text != "" || res.Count > 0 && n != res.Count-1 || res.Cut && res.Count != 1 {
		return nil, fmt.Errorf("nvim read: %s: got %d lines, Neovim said %d", ref, n+1, res.Count)
	}
	if res.Cut {
		res.Text = trimPartialRune(res.Text)
	}
	return &BufferText{
		Buffer: res.Buf, Name: makeText(res.Name), Total: res.Total, First: res.First, Count: res.Count,
		Modified: res.Modified, Truncated: res.Truncated, Cut: res.Cut, Tick: res.Tick,
		joined: res.Text, plain: plainLines(res.Text),
	}, nil
}

// BufferInfo describes one buffer in Status.
type BufferInfo struct {
	Number   int    `json:"number"`
	Name     Text   `json:"name"`
	Loaded   bool   `json:"loaded"`
	Listed   bool   `json:"listed"`
	Modified bool   `json:"modified"`
	Lines    int    `json:"lines"` // 0 when not loaded
	Filetype string `json:"filetype"`
	Buftype  string `json:"buftype"` // "" for a normal file buffer
}

// Status is a snapshot of the editor.
type Status struct {
	Mode     string `json:"mode"`
	Blocking bool   `json:"blocking"`
	// Waiting: Neovim is at a prompt waiting for the student's key, so only
	// Mode and Blocking are filled in (asking more would hang).
	Waiting bool `json:"waiting,omitempty"`

	Buffer int `json:"buffer"` // current buffer
	Window int `json:"window"`
	Line   int `json:"line"` // cursor, 1-based
	Col    int `json:"col"`  // cursor, 1-based byte column
	// File is the current buffer's absolute path, empty unless it is a
	// normal buffer with a name.
	File             Text         `json:"file"`
	Cwd              Text         `json:"cwd"`
	Buffers          []BufferInfo `json:"buffers"`
	BuffersTruncated bool         `json:"buffers_truncated,omitempty"`
}

// Status reports mode, cursor, current file and the buffer list. While
// Neovim waits at a prompt it returns only the mode, with Waiting set, and
// no error: that state is itself what an observer wants to know.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var res struct {
		Buf     int    `msgpack:"buf"`
		Win     int    `msgpack:"win"`
		Line    int    `msgpack:"line"`
		Col     int    `msgpack:"col"`
		Cwd     string `msgpack:"cwd"`
		NBufs   int    `msgpack:"nbufs"`
		Buffers []struct {
			Number   int    `msgpack:"number"`
			Name     string `msgpack:"name"`
			Loaded   bool   `msgpack:"loaded"`
			Listed   bool   `msgpack:"listed"`
			Modified bool   `msgpack:"modified"`
			Lines    int    `msgpack:"lines"`
			Filetype string `msgpack:"filetype"`
			Buftype  string `msgpack:"buftype"`
		} `msgpack:"buffers"`
	}
	var m gonvim.Mode
	err := c.do(ctx, "status", true, func(ctx context.Context, s *session) (err error) {
		if m, err = s.mode(ctx); err != nil {
			return err
		}
		if blocked(m, guardHang) {
			return nil
		}
		return s.run(ctx, func(v *gonvim.Nvim) error { return execLua(v, fnStatus, &res, MaxBuffers) })
	})
	if err != nil {
		return nil, err
	}
	st := &Status{Mode: m.Mode, Blocking: m.Blocking}
	if blocked(m, guardHang) {
		st.Waiting = true
		return st, nil
	}
	st.Buffer, st.Window, st.Line, st.Col = res.Buf, res.Win, res.Line, res.Col+1
	st.Cwd = makeText(res.Cwd)
	st.BuffersTruncated = res.NBufs > len(res.Buffers)
	st.Buffers = make([]BufferInfo, len(res.Buffers))
	for i, b := range res.Buffers {
		st.Buffers[i] = BufferInfo{
			Number: b.Number, Name: makeText(b.Name), Loaded: b.Loaded, Listed: b.Listed,
			Modified: b.Modified, Lines: b.Lines, Filetype: b.Filetype, Buftype: b.Buftype,
		}
		if b.Number == res.Buf && b.Buftype == "" && filepath.IsAbs(b.Name) {
			st.File = makeText(b.Name)
		}
	}
	return st, nil
}

// Severity names, as in vim.diagnostic.severity.
var severityNames = [...]string{1: "error", 2: "warning", 3: "info", 4: "hint"}

// Diagnostic is one vim.diagnostic entry, with 1-based positions.
type Diagnostic struct {
	Buffer   int    `json:"buffer"`
	File     Text   `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"` // 1-based byte column
	EndLine  int    `json:"end_line"`
	EndCol   int    `json:"end_col"`
	Severity string `json:"severity"`
	Message  Text   `json:"message"`
	Source   Text   `json:"source,omitempty"`
	Code     Text   `json:"code,omitempty"`
}

// Diagnostics is the result of Client.Diagnostics.
type Diagnostics struct {
	Items     []Diagnostic `json:"items"`
	Total     int          `json:"total"`
	Truncated bool         `json:"truncated,omitempty"`
}

// Diagnostics returns vim.diagnostic.get() for buffer buf, or for all
// buffers when buf is 0, at most MaxDiagnostics of them.
func (c *Client) Diagnostics(ctx context.Context, buf int) (*Diagnostics, error) {
	if buf < 0 {
		return nil, fmt.Errorf("nvim diagnostics: buffer number %d: must be 0 (all) or more", buf)
	}
	var res struct {
		Err   string `msgpack:"err"`
		Total int    `msgpack:"total"`
		Items []struct {
			Buf      int    `msgpack:"buf"`
			Name     string `msgpack:"name"`
			Lnum     int    `msgpack:"lnum"`
			Col      int    `msgpack:"col"`
			EndLnum  int    `msgpack:"end_lnum"`
			EndCol   int    `msgpack:"end_col"`
			Severity int    `msgpack:"severity"`
			Message  string `msgpack:"message"`
			Source   string `msgpack:"source"`
			Code     string `msgpack:"code"`
		} `msgpack:"items"`
	}
	err := c.call(ctx, "diagnostics", guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fnDiagnostics, &res, buf, MaxDiagnostics)
	})
	if err != nil {
		return nil, err
	}
	if err := mapErr(res.Err, Buf(buf).String()); err != nil {
		return nil, fmt.Errorf("nvim diagnostics: %w", err)
	}
	out := &Diagnostics{Total: res.Total, Truncated: res.Total > len(res.Items), Items: make([]Diagnostic, len(res.Items))}
	for i, d := range res.Items {
		sev := "unknown"
		if d.Severity >= 1 && d.Severity < len(severityNames) {
			sev = severityNames[d.Severity]
		}
		out.Items[i] = Diagnostic{
			Buffer: d.Buf, File: makeText(d.Name),
			Line: d.Lnum + 1, Col: d.Col + 1, EndLine: d.EndLnum + 1, EndCol: d.EndCol + 1,
			Severity: sev, Message: makeText(d.Message), Source: makeText(d.Source), Code: makeText(d.Code),
		}
	}
	return out, nil
}
