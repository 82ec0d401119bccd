package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/sockets"
)

// TmuxInside returns a probe that asks container id's own tmux (through
// exec) whether the server on sock has a session: for when the host's tmux
// speaks another protocol version or there is none (verify.Checker).
func TmuxInside(e engine.Engine) func(ctx context.Context, id, sock string) error {
	return func(ctx context.Context, id, sock string) error {
		return tmuxInside(ctx, e, id, sock)
	}
}

// tmuxInside asks container id's tmux whether the server on sock has a
// session.
func tmuxInside(ctx context.Context, e engine.Engine, id, sock string) error {
	var out strings.Builder
	code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"tmux", "-S", sock, "list-sessions", "-F", "#{session_name}"}, Stdout: &out, Stderr: &out})
	if err != nil {
		return fmt.Errorf("tmux in the container: %w", err)
	}
	if code != 0 || strings.TrimSpace(out.String()) == "" {
		return fmt.Errorf("tmux server on %s does not answer (asked inside the container): %s", sock, strings.TrimSpace(out.String()))
	}
	return nil
}

// serverDown says which server did not answer, and why.
type serverDown struct {
	server string // tmux or nvim
	err    error
}

func (e *serverDown) Error() string { return e.server + ": " + e.err.Error() }

func (e *serverDown) Unwrap() error { return e.err }

// gone says the server is not there at all (no socket, or nobody listening),
// as opposed to there but slow to answer.
func (e *serverDown) gone() bool {
	return errors.Is(e.err, os.ErrNotExist) || errors.Is(e.err, syscall.ECONNREFUSED)
}

// probe checks both servers in container id's directory.
func (m *Manager) probe(ctx context.Context, dir sockets.Dir, id string) error {
	if err := dir.CheckSockets(); err != nil {
		return err
	}
	// tmux first: nvim runs in it, so a dead tmux means a dead nvim too,
	// and only a live tmux makes restarting nvim alone worth it.
	if _, err := os.Stat(dir.Tmux()); err != nil {
		return &serverDown{"tmux", err}
	}
	h := m.Servers.Check(ctx, dir, id)
	if h.Tmux != nil {
		return &serverDown{"tmux", h.Tmux}
	}
	if _, err := os.Stat(dir.Nvim()); err != nil {
		return &serverDown{"nvim", err}
	}
	if h.Nvim != nil {
		return &serverDown{"nvim", h.Nvim}
	}
	return nil
}
