package tmux

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// commandCtx applies the default timeout to a context without deadline.
func (c *Client) commandCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.CommandTimeout)
}

// exec sends one command line (commands joined with " ; ", all built by us
// from validated parts) and returns the output of each command. If a
// command fails, tmux drops the rest of the line and exec returns a
// *CommandError.
func (c *Client) exec(ctx context.Context, cmds ...string) ([]string, error) {
	ctx, cancel := c.commandCtx(ctx)
	defer cancel()
	line := strings.Join(cmds, " ; ")
	if strings.ContainsAny(line, "\n\r") || strings.IndexByte(line, 0) >= 0 {
		return nil, fmt.Errorf("%w: command line with a line break", ErrInvalidArgument)
	}
	req := &request{nonce: newNonce(), cmd: line, done: make(chan response, 1)}
	payload := line + "\ndisplay-message -p " + req.nonce + "\n"

	c.wmu.Lock()
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, err
	}
	c.pending = append(c.pending, req)
	c.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		c.stdin.SetWriteDeadline(dl)
	}
	n, werr := c.stdin.Write([]byte(payload))
	c.wmu.Unlock()
	if werr != nil {
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			if n == 0 {
				c.dropPending(req)
			} else {
				// A partial command line poisons the stream.
				c.peer.kill()
			}
			// The write deadline can pass a moment before ctx says so.
			return nil, fmt.Errorf("tmux: sending %s: %w", firstWord(line), cmp.Or(ctx.Err(), context.DeadlineExceeded))
		}
		// The pipe broke: the client is gone or going. Make sure it is,
		// and report the connection's end rather than EPIPE.
		c.peer.kill()
		select {
		case <-c.done:
			return nil, c.Err()
		case <-time.After(2 * time.Second):
			return nil, fmt.Errorf("%w: sending %s: %v", ErrClosed, firstWord(line), werr)
		}
	}

	var resp response
	select {
	case resp = <-req.done:
	case <-ctx.Done():
		// The request stays queued; its answer is discarded on arrival.
		return nil, fmt.Errorf("tmux: waiting for %s: %w", firstWord(line), ctx.Err())
	}
	if resp.err != nil {
		return nil, resp.err
	}
	outs := make([]string, 0, len(resp.blocks))
	for i, b := range resp.blocks {
		if b.failed {
			cmd := line
			if i < len(cmds) {
				cmd = cmds[i]
			}
			return outs, &CommandError{Command: firstWord(cmd), Message: b.text()}
		}
		outs = append(outs, b.text())
	}
	if len(outs) != len(cmds) {
		return outs, fmt.Errorf("%w: %d commands gave %d blocks", ErrProtocol, len(cmds), len(outs))
	}
	return outs, nil
}

// dropPending removes a request that was never sent.
func (c *Client) dropPending(req *request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pending {
		if p == req {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return
		}
	}
}

// command runs one command and returns its output.
func (c *Client) command(ctx context.Context, cmd string) (string, error) {
	outs, err := c.exec(ctx, cmd)
	if err != nil {
		return "", err
	}
	return outs[0], nil
}

// newNonce returns a fresh sentinel: 128 random bits, never shown in a pane.
func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return "stem-" + hex.EncodeToString(b[:])
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}
