package tmux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stem-edu/stem/internal/termtext"
)

// WaitShell waits until a pane that was just created runs its shell, and
// returns ErrNotAtPrompt if what it runs then is not one of Options.Shells.
//
// Until tmux has exec'd the pane's program, the pane's process is tmux's own
// fork, so #{pane_current_command} reads "tmux": Run on a window opened a
// moment ago would refuse it. The program's first output (a shell's prompt)
// proves the exec happened, so WaitShell waits for any output from the pane
// (or its end) instead of polling. A shell still reading its rc files is
// fine: Run's probe waits for its prompt. (A window whose program is
// itself named tmux waits until ctx ends.)
func (c *Client) WaitShell(ctx context.Context, pane PaneID) error {
	if err := pane.check(); err != nil {
		return err
	}
	ctx, cancel := c.commandCtx(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	remove := c.addTap(func(n *Notification) {
		if (n.Kind == "output" && n.Pane == pane) || n.Kind == "window-close" || n.Kind == "unlinked-window-close" || n.Kind == "exit" {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer remove()
	for {
		st, err := c.paneState(ctx, pane)
		if err != nil {
			return err
		}
		switch {
		case st.dead:
			return fmt.Errorf("%w: %s", ErrPaneDead, pane)
		case slices.Contains(c.opts.Shells, st.command):
			return nil
		case st.command != "tmux":
			return fmt.Errorf("%w: %s is running %q", ErrNotAtPrompt, pane, termtext.String(termtext.Clip(st.command, 64)))
		}
		select {
		case <-wake:
		case <-c.done:
			return c.Err()
		case <-ctx.Done():
			return fmt.Errorf("%w: %s did not start its shell: %v", ErrTimeout, pane, ctx.Err())
		}
	}
}

// startGrace is how long Run gives a pane whose program reads "tmux" to
// become its shell.
const startGrace = 2 * time.Second

// settled waits up to startGrace for a pane whose program reads "tmux" to
// run its shell, and returns its state then (st if it still does not).
// "tmux" is a shell starting: tmux's fork before the exec, or, while the
// shell reads its rc files, the integration's one `tmux set-option` in the
// foreground, which WaitShell cannot tell from the shell's exec.
func (c *Client) settled(ctx context.Context, pane PaneID, st paneState) (paneState, error) {
	gctx, cancel := context.WithTimeout(ctx, startGrace)
	defer cancel()
	if c.settling != nil {
		c.settling()
	}
	if err := c.WaitShell(gctx, pane); err != nil {
		if errors.Is(err, ErrTimeout) && ctx.Err() == nil {
			return st, nil
		}
		return st, err
	}
	return c.paneState(ctx, pane)
}
