// Package probe answers one question cheaply: does a tmux or Neovim server
// answer on this socket? stemctl uses it while waiting for a new instance and
// in status; long-lived consumers (stem-mcp) keep real connections instead.
package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/tmux"
)

// ErrTmuxVersion means the server speaks another tmux protocol version
// than stem's client.
var ErrTmuxVersion = errors.New("tmux protocol version mismatch between stem's client and the container's server")

// Tmux asks the server on socket whether it has a session. The client is
// tmux's protocol spoken in Go (tmux.Ping): it needs no tmux on this host
// and does nothing the server asks, since the server belongs to the
// container. The socket is opened without following a symlink.
func Tmux(ctx context.Context, socket string) error {
	err := tmux.Ping(ctx, socket)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tmux.ErrVersionMismatch):
		return fmt.Errorf("%w: %w", ErrTmuxVersion, err)
	case errors.Is(err, tmux.ErrNoSession):
		return fmt.Errorf("tmux server on %s has no session", socket)
	}
	return fmt.Errorf("tmux server on %s does not answer: %w", socket, err)
}

// Nvim connects to the RPC socket through internal/nvim (pinned, every
// message checked by rpcguard, server text sanitized) and asks for the
// mode, a "fast" request that nvim answers even while it waits for input.
func Nvim(ctx context.Context, socket string) error {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	c, err := nvim.Dial(ctx, socket, nvim.Options{})
	if err == nil {
		_, err = c.Mode(ctx)
		c.Close()
	}
	if err != nil {
		return fmt.Errorf("nvim on %s does not answer: %w", socket, err)
	}
	return nil
}

func withDefault(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// NvimModified returns the buffers with unsaved changes in the nvim on
// socket (nvim.Client.Unsaved: sanitized names, at most a few). An nvim
// that is gone (no socket, nobody listening) has none; one that does not
// answer in time, waits for input or sends what stem refuses is an error,
// since its buffers cannot be vouched for. The socket is opened without
// following a symlink (internal/lib/unixpin): n.sock is in a directory the
// container writes.
func NvimModified(ctx context.Context, socket string) ([]string, error) {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	c, err := nvim.Dial(ctx, socket, nvim.Options{})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil
		}
		return nil, fmt.Errorf("ask nvim on %s for unsaved buffers: %w", socket, err)
	}
	defer c.Close()
	names, err := c.Unsaved(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("nvim on %s did not say whether buffers are unsaved (is it waiting for input?): %w", socket, err)
		}
		return nil, fmt.Errorf("ask nvim on %s for unsaved buffers: %w", socket, err)
	}
	return names, nil
}

// NvimQuit ends the nvim on socket without saving (:qa!), so its swap
// files go with it: what `stemctl down --force` discards stays discarded,
// and the next editor does not stop at a swap-file question. An nvim at a
// prompt or on its command line is left alone (stopping the container
// ends it as before); like NvimModified it never follows a symlink.
func NvimQuit(ctx context.Context, socket string) {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	c, err := nvim.Dial(ctx, socket, nvim.Options{})
	if err != nil {
		return
	}
	defer c.Close()
	// The answer never comes: nvim exits with the request.
	c.Command(ctx, "qa!")
}

// TmuxActivity is when the student's tmux session last had output or a key
// from a terminal (tmux.Client.Activity), asked over a control connection
// in Go like every other host-side tmux client.
func TmuxActivity(ctx context.Context, socket string) (time.Time, error) {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	c, err := tmux.Dial(ctx, tmux.Options{Socket: socket})
	if err != nil {
		return time.Time{}, fmt.Errorf("tmux server on %s does not answer: %w", socket, err)
	}
	defer c.Close()
	return c.Activity(ctx)
}
