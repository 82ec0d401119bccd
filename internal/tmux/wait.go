package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stem-edu/stem/internal/termtext"
)

// WaitOptions say what Wait waits for. At least one of Pattern and Quiet
// must be set.
type WaitOptions struct {
	// Pattern is matched against the pane's text (sanitized, as Capture
	// returns it): the visible screen plus the lines that scrolled off it
	// since Wait began (up to MaxLines). Text already on the screen when
	// Wait starts counts.
	Pattern *regexp.Regexp
	// Quiet returns once the pane has printed nothing for this long.
	Quiet time.Duration
	// Timeout bounds the wait (in addition to ctx); default 30s.
	Timeout time.Duration
	// MaxLines bounds the scrolled-off lines searched; default 2000.
	MaxLines int
}

// WaitResult says why Wait returned.
type WaitResult struct {
	Matched bool          `json:"matched"`
	Match   string        `json:"match,omitempty"`
	Quiet   bool          `json:"quiet"`
	Elapsed time.Duration `json:"elapsed"`
}

// minCaptureGap rate-limits re-captures while output streams in, well
// below the 20 ms in which Wait must notice new text.
const minCaptureGap = 2 * time.Millisecond

// Wait returns when Pattern appears in the pane or the pane has been quiet
// for Quiet. It is driven by the pane's %output notifications: nothing is
// polled while the pane is silent. It fails with ErrTimeout when neither
// happens in time, ErrNoPane when the pane goes away, and the connection's
// error when it ends.
func (c *Client) Wait(ctx context.Context, pane PaneID, opt WaitOptions) (WaitResult, error) {
	start := time.Now()
	if err := pane.check(); err != nil {
		return WaitResult{}, err
	}
	if opt.Pattern == nil && opt.Quiet <= 0 {
		return WaitResult{}, fmt.Errorf("%w: Wait needs a pattern or a quiet time", ErrInvalidArgument)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.MaxLines <= 0 {
		opt.MaxLines = 2000
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()

	st, err := c.paneState(ctx, pane)
	if err != nil {
		return WaitResult{}, err
	}
	if st.session != c.session {
		return WaitResult{}, fmt.Errorf("%w: %s is in %s, this client watches %s", ErrNotInSession, pane, st.session, c.session)
	}

	// The tap counts the pane's output and newlines and wakes us; it never
	// blocks the reader.
	var newlines atomic.Int64
	kick := make(chan struct{}, 1)
	structural := make(chan struct{}, 1)
	remove := c.addTap(func(n *Notification) {
		switch {
		case n.Kind == "output" && n.Pane == pane:
			newlines.Add(int64(bytes.Count(n.Data, []byte("\n"))))
			select {
			case kick <- struct{}{}:
			default:
			}
		case n.Kind == "window-close" || n.Kind == "unlinked-window-close" || n.Kind == "layout-change" || n.Kind == "exit":
			select {
			case structural <- struct{}{}:
			default:
			}
		}
	})
	defer remove()

	timedOut := func() (WaitResult, error) {
		return WaitResult{Elapsed: time.Since(start)}, fmt.Errorf("%w: waiting on %s after %v", ErrTimeout, pane, time.Since(start).Round(time.Millisecond))
	}
	match := func() (WaitResult, bool, error) {
		if opt.Pattern == nil {
			return WaitResult{}, false, nil
		}
		text, err := c.waitText(ctx, pane, int(min(newlines.Load(), int64(opt.MaxLines))))
		if ranOut(ctx, err) {
			// The time ran out during a capture (a busy pane): that is
			// the wait's timeout, not a failed command.
			r, err := timedOut()
			return r, false, err
		}
		if err != nil {
			return WaitResult{}, false, err
		}
		if loc := opt.Pattern.FindStringIndex(text); loc != nil {
			return WaitResult{Matched: true, Match: text[loc[0]:loc[1]], Elapsed: time.Since(start)}, true, nil
		}
		return WaitResult{}, false, nil
	}
	if r, ok, err := match(); err != nil || ok {
		return r, err
	}

	var quiet <-chan time.Time
	var quietTimer *time.Timer
	if opt.Quiet > 0 {
		quietTimer = time.NewTimer(opt.Quiet)
		defer quietTimer.Stop()
		quiet = quietTimer.C
	}
	var lastCapture time.Time
	for {
		select {
		case <-kick:
			if quietTimer != nil {
				quietTimer.Reset(opt.Quiet)
			}
			if opt.Pattern == nil {
				continue
			}
			if gap := time.Since(lastCapture); gap < minCaptureGap {
				time.Sleep(minCaptureGap - gap)
			}
			lastCapture = time.Now()
			if r, ok, err := match(); err != nil || ok {
				return r, err
			}
		case <-quiet:
			// A last look: output may have arrived as the timer fired.
			if r, ok, err := match(); err != nil || ok {
				return r, err
			}
			return WaitResult{Quiet: true, Elapsed: time.Since(start)}, nil
		case <-structural:
			if _, err := c.paneState(ctx, pane); ranOut(ctx, err) {
				return timedOut()
			} else if err != nil {
				return WaitResult{}, err
			}
		case <-c.done:
			return WaitResult{}, c.Err()
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return timedOut()
			}
			return WaitResult{}, ctx.Err()
		}
	}
}

// ranOut reports whether err is ctx's deadline passing. A command's write
// deadline is ctx's and can fire a moment before ctx itself says so, so the
// clock decides while ctx.Err is still nil.
func ranOut(ctx context.Context, err error) bool {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if ctx.Err() != nil {
		return errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// waitText captures the screen plus `extra` lines of history above it.
func (c *Client) waitText(ctx context.Context, pane PaneID, extra int) (string, error) {
	cmd := "capture-pane -p -J -t " + string(pane) + " -S " + strconv.Itoa(-extra) + " -E -"
	out, err := c.command(ctx, cmd)
	if err != nil {
		return "", fmt.Errorf("tmux: capture %s: %w", pane, err)
	}
	text, _ := termtext.Sanitize([]byte(out), termtext.Options{})
	return text, nil
}
