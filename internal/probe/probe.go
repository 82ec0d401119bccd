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

	"github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/unixpin"
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

// Nvim dials the RPC socket and asks for the mode (a "fast" request that
// nvim answers even while it waits for input).
func Nvim(ctx context.Context, socket string) error {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var v *nvim.Nvim
	go func() {
		var err error
		var pinned *unixpin.Socket
		if pinned, err = unixpin.Open(socket); err != nil {
			done <- err
			return
		}
		v, err = nvim.Dial(pinned.Path(), nvim.DialContext(ctx), nvim.DialServe(true))
		pinned.Close()
		if err == nil {
			_, err = v.Mode()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if v != nil {
			v.Close()
		}
		if err != nil {
			return fmt.Errorf("nvim on %s does not answer: %w", socket, err)
		}
		return nil
	case <-ctx.Done():
		go func() {
			<-done
			if v != nil {
				v.Close()
			}
		}()
		return fmt.Errorf("nvim on %s does not answer: %w", socket, ctx.Err())
	}
}

func withDefault(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// modifiedLua lists the buffers with unsaved changes (name, or "[buffer N]"
// for an unnamed one). getbufinfo is not a "fast" function: nvim answers
// only when it is not blocked waiting for input, so callers bound the wait.
const modifiedLua = `local r = {}
for _, b in ipairs(vim.fn.getbufinfo({bufmodified = 1})) do
  r[#r + 1] = (b.name ~= '' and b.name) or ('[buffer ' .. b.bufnr .. ']')
end
return r`

// NvimModified returns the buffers with unsaved changes in the nvim on
// socket. An nvim that is gone (no socket, nobody listening) has none; one
// that does not answer in time (blocked mid-command) is an error, since its
// buffers cannot be vouched for.
func NvimModified(ctx context.Context, socket string) ([]string, error) {
	ctx, cancel := withDefault(ctx, 2*time.Second)
	defer cancel()
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	var v *nvim.Nvim
	go func() {
		var r result
		v, r.err = nvim.Dial(socket, nvim.DialContext(ctx), nvim.DialServe(true))
		if r.err == nil {
			r.err = v.ExecLua(modifiedLua, &r.names)
		}
		done <- r
	}()
	select {
	case r := <-done:
		if v != nil {
			v.Close()
		}
		if r.err != nil && (errors.Is(r.err, os.ErrNotExist) || errors.Is(r.err, syscall.ECONNREFUSED)) {
			return nil, nil
		}
		if r.err != nil {
			return nil, fmt.Errorf("ask nvim on %s for unsaved buffers: %w", socket, r.err)
		}
		return r.names, nil
	case <-ctx.Done():
		go func() {
			<-done
			if v != nil {
				v.Close()
			}
		}()
		return nil, fmt.Errorf("nvim on %s did not say whether buffers are unsaved (is it waiting for input?): %w", socket, ctx.Err())
	}
}
