package nvim

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrTickChanged is SetLinesAt's error when the buffer changed since the
// tick the caller gave.
var ErrTickChanged = errors.New("the buffer changed")

// Snapshot is a whole buffer as Neovim holds it, for hashing (provenance
// records): the lines exactly as sent, not cleaned, so they must never be
// shown or passed on as they are.
type Snapshot struct {
	Buffer int
	Tick   int // b:changedtick when it was read
	Lines  []string
	// TooLarge: the buffer is over the byte budget; Lines is nil.
	TooLarge bool
}

// Snapshot reads all of buffer buf, at most maxBytes of text (each line
// counting one more for its newline).
func (c *Client) Snapshot(ctx context.Context, buf, maxBytes int) (*Snapshot, error) {
	bt, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, maxBytes)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Buffer: bt.Buffer, Tick: bt.Tick}
	switch {
	case bt.Truncated || bt.Cut || bt.Count != bt.Total:
		s.TooLarge = true
	case bt.Count > 0:
		s.Lines = strings.Split(bt.joined, "\n")
	}
	if s.Lines != nil && len(s.Lines) != bt.Total {
		return nil, fmt.Errorf("nvim snapshot: %s: got %d lines, Neovim said %d", Buf(buf), len(s.Lines), bt.Total)
	}
	return s, nil
}

// SetLinesAt is SetLines done only while the buffer's changedtick is
// still tick, checked in the same Neovim call that edits: nothing the
// student types can fall between the check and the edit. A buffer that
// changed gives ErrTickChanged and is left alone.
func (c *Client) SetLinesAt(ctx context.Context, buf, tick, start, end int, lines []string) (*Edited, error) {
	return c.setLines(ctx, buf, start, end, lines, &tick)
}
