// Package probe answers one question cheaply: does a tmux or Neovim server
// answer on this socket? stemctl uses it while waiting for a new instance and
// in status; long-lived consumers (stem-mcp) keep real connections instead.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/unixpin"
)

// ErrTmuxVersion means the host's tmux cannot talk to the server (the
// client/server protocol is version-specific).
var ErrTmuxVersion = errors.New("tmux protocol version mismatch between the host client and the container's server")

// ErrNoHostTmux means there is no tmux client on this host to ask with.
var ErrNoHostTmux = errors.New("tmux is not installed on this host (apt-get install tmux)")

// Tmux asks the server on socket for its sessions with a host tmux client.
func Tmux(ctx context.Context, socket string) error {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	// Pinned (see package unixpin): a symlink planted from the container
	// must not make us report some other server as the instance's.
	pinned, err := unixpin.Open(socket)
	if err != nil {
		return fmt.Errorf("tmux server on %s does not answer: %w", socket, err)
	}
	defer pinned.Close()
	cmd := exec.CommandContext(ctx, "tmux", "-S", unixpin.ChildPath, "list-sessions", "-F", "#{session_name}")
	cmd.ExtraFiles = []*os.File{pinned.File()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%w: %v", ErrNoHostTmux, err)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "protocol version mismatch") {
			return fmt.Errorf("%w: %s", ErrTmuxVersion, msg)
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("tmux server on %s does not answer: %s", socket, msg)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return fmt.Errorf("tmux server on %s has no session", socket)
	}
	return nil
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
// following a symlink (internal/unixpin): n.sock is in a directory the
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
