package tmux

import (
	"bytes"
	"fmt"
)

// The control-mode stream, as tmux 3.3a writes it:
//
//	%begin TIME NUMBER FLAGS      one block per command; FLAGS is 1 for
//	...output lines...            commands this control client sent
//	%end TIME NUMBER FLAGS        (or %error ...)
//	%output %PANE ESCAPED-DATA    notifications, only between blocks
//
// Output lines inside a block are raw: a captured pane line or a pane title
// can read "%end 1700000000 42 1". Guessing TIME and NUMBER is easy, so a
// block's end cannot be recognised by its guard line alone. We therefore
// frame every request: the command line is followed by a second line,
// `display-message -p NONCE`, with a fresh random NONCE (it runs even if the
// first line fails, being its own command group). The response to a request
// is everything from its first block up to the block that consists of exactly
// NONCE; nothing a pane prints can produce that. Inside that region, blocks
// other than the last are output of our own fixed commands (trusted,
// first-guard framing); at most one command per request may print untrusted
// text and it is always the last one, whose block runs from the first
// %begin to the last guard carrying its key. Notifications that arrive
// inside a region are held and dispatched when it closes, so a forged
// "%output" line inside captured text is never taken as a notification.

type guard struct {
	kind  byte   // 'b' begin, 'e' end, 'x' error
	key   string // "TIME NUMBER FLAGS"
	flags int
}

var (
	beginPrefix = []byte("%begin ")
	endPrefix   = []byte("%end ")
	errorPrefix = []byte("%error ")
)

// parseGuard recognises "%begin|%end|%error T N F" with exactly three
// decimal fields.
func parseGuard(line []byte) (guard, bool) {
	var g guard
	var rest []byte
	switch {
	case bytes.HasPrefix(line, beginPrefix):
		g.kind, rest = 'b', line[len(beginPrefix):]
	case bytes.HasPrefix(line, endPrefix):
		g.kind, rest = 'e', line[len(endPrefix):]
	case bytes.HasPrefix(line, errorPrefix):
		g.kind, rest = 'x', line[len(errorPrefix):]
	default:
		return g, false
	}
	fields := 0
	digits := 0
	for _, c := range rest {
		switch {
		case c >= '0' && c <= '9':
			digits++
			if digits > 20 {
				return g, false
			}
		case c == ' ' && digits > 0 && fields < 2:
			fields++
			digits = 0
		default:
			return g, false
		}
	}
	if fields != 2 || digits == 0 {
		return g, false
	}
	g.key = string(rest)
	if bytes.HasSuffix(rest, []byte(" 1")) {
		g.flags = 1
	}
	return g, true
}

// block is the output of one command.
type block struct {
	lines  [][]byte
	failed bool // %error
}

func (b block) text() string { return string(bytes.Join(b.lines, []byte("\n"))) }

// demux splits the control stream into request responses and notifications.
// It is a pure state machine fed one line at a time by the reader goroutine.
type demux struct {
	maxRegion int
	// head returns the nonce of the oldest request still waiting.
	head func() (string, bool)
	// deliver completes the oldest request.
	deliver func(blocks []block, err error)
	// notify receives a notification line (the slice is not retained by
	// the demux after the call returns).
	notify func(line []byte)

	// Outside regions: skipping a block that is not ours (FLAGS 0, e.g.
	// the attach-session command itself or a hook).
	skipping bool
	skipKey  string
	skipText [][]byte
	// lastError is the text of the last such block that failed; the
	// attach-session error ("can't find session") arrives this way.
	lastError string

	inRegion   bool
	nonce      string
	region     [][]byte
	regionSize int
}

const maxSkipText = 4096

func (d *demux) feed(line []byte) error {
	if d.inRegion {
		cp := bytes.Clone(line)
		d.region = append(d.region, cp)
		d.regionSize += len(cp) + 1
		if d.regionSize > d.maxRegion {
			return fmt.Errorf("%w: response over %d bytes", ErrProtocol, d.maxRegion)
		}
		g, ok := parseGuard(line)
		if !ok || g.kind != 'e' || g.flags != 1 {
			return nil
		}
		n := len(d.region)
		if n < 3 || string(d.region[n-2]) != d.nonce {
			return nil
		}
		if b, ok := parseGuard(d.region[n-3]); !ok || b.kind != 'b' || b.key != g.key {
			return nil
		}
		blocks, notes, err := parseRegion(d.region[:n-3])
		d.inRegion, d.region, d.regionSize, d.nonce = false, nil, 0, ""
		for _, l := range notes {
			d.notify(l)
		}
		d.deliver(blocks, err)
		return nil
	}
	if d.skipping {
		if g, ok := parseGuard(line); ok && g.kind != 'b' && g.key == d.skipKey {
			d.skipping = false
			if g.kind == 'x' {
				d.lastError = string(bytes.Join(d.skipText, []byte("; ")))
			}
			d.skipText = nil
			return nil
		}
		if len(d.skipText) < 8 {
			d.skipText = append(d.skipText, bytes.Clone(line[:min(len(line), maxSkipText)]))
		}
		return nil
	}
	if g, ok := parseGuard(line); ok {
		if g.kind != 'b' {
			return nil // a stray guard outside any block: ignore it
		}
		if g.flags == 1 {
			if nonce, ok := d.head(); ok {
				d.inRegion, d.nonce = true, nonce
				d.region = append(d.region[:0], bytes.Clone(line))
				d.regionSize = len(line) + 1
				return nil
			}
		}
		d.skipping, d.skipKey, d.skipText = true, g.key, nil
		return nil
	}
	if len(line) > 0 && line[0] == '%' {
		d.notify(line)
	}
	// Anything else outside a block is not part of the protocol; drop it.
	return nil
}

// parseRegion splits a request's region (without its sentinel block) into
// our blocks and the notifications that arrived in between.
func parseRegion(lines [][]byte) ([]block, [][]byte, error) {
	last, lastKey := -1, ""
	var lastKind byte
	for i := len(lines) - 1; i >= 0; i-- {
		if g, ok := parseGuard(lines[i]); ok && g.kind != 'b' && g.flags == 1 {
			last, lastKey, lastKind = i, g.key, g.kind
			break
		}
	}
	if last < 0 {
		return nil, nil, fmt.Errorf("%w: no command block before the sentinel", ErrProtocol)
	}
	first := -1
	for i := 0; i < last; i++ {
		if g, ok := parseGuard(lines[i]); ok && g.kind == 'b' && g.key == lastKey {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, nil, fmt.Errorf("%w: block %q has no %%begin", ErrProtocol, lastKey)
	}
	blocks, notes, err := parseBlocks(lines[:first])
	if err != nil {
		return nil, nil, err
	}
	blocks = append(blocks, block{lines: lines[first+1 : last], failed: lastKind == 'x'})
	_, trailing, err := parseBlocks(lines[last+1:])
	if err != nil {
		return nil, nil, err
	}
	return blocks, append(notes, trailing...), nil
}

// parseBlocks parses trusted output: a block ends at the first guard with its
// key. Blocks with FLAGS 0 are not ours and are dropped.
func parseBlocks(lines [][]byte) ([]block, [][]byte, error) {
	var blocks []block
	var notes [][]byte
	for i := 0; i < len(lines); i++ {
		g, ok := parseGuard(lines[i])
		if !ok {
			if len(lines[i]) > 0 && lines[i][0] == '%' {
				notes = append(notes, lines[i])
			}
			continue
		}
		if g.kind != 'b' {
			return nil, nil, fmt.Errorf("%w: %%end without %%begin", ErrProtocol)
		}
		j := i + 1
		for ; j < len(lines); j++ {
			if e, ok := parseGuard(lines[j]); ok && e.kind != 'b' && e.key == g.key {
				break
			}
		}
		if j == len(lines) {
			return nil, nil, fmt.Errorf("%w: unterminated block %q", ErrProtocol, g.key)
		}
		if g.flags == 1 {
			kind, _ := parseGuard(lines[j])
			blocks = append(blocks, block{lines: lines[i+1 : j], failed: kind.kind == 'x'})
		}
		i = j
	}
	return blocks, notes, nil
}

// unescapeOutput decodes the payload of %output: tmux writes bytes below
// 0x20 and the backslash as \ooo and everything else as is.
func unescapeOutput(s []byte) []byte {
	if bytes.IndexByte(s, '\\') < 0 {
		return bytes.Clone(s)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, c)
	}
	return out
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
