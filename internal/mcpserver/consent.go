package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/lib/filestamp"
	"github.com/stem-edu/stem/internal/tmux"
)

// The student's consents (panes open to assist-level keys, files marked
// editable) are read from the host's record (internal/consent), never
// from the container: its tmux options and Neovim buffer variables are
// written by whatever runs there.

// consents returns the host's record for the instance of c. An error
// (say, a damaged file) allows nothing.
func (s *Server) consents(ctx context.Context, c *conn) (consent.Entry, error) {
	if s.consentErr != nil {
		return consent.Entry{}, s.consentErr
	}
	return s.consent.Get(ctx, c.target().Record.Instance)
}

// paneAllowed reports whether the student allowed keys to pane on the host.
func (s *Server) paneAllowed(ctx context.Context, c *conn, pane tmux.PaneID) (bool, error) {
	e, err := s.consents(ctx, c)
	if err != nil {
		return false, err
	}
	return e.PaneAllowed(c.target().Record.ContainerID, string(pane)), nil
}

// hostView replaces what the container's tmux says about @stem_allow with
// what the student allowed on the host.
func (s *Server) hostView(ctx context.Context, c *conn, panes []tmux.Pane) ([]tmux.Pane, error) {
	e, err := s.consents(ctx, c)
	if err != nil {
		return nil, err
	}
	cid := c.target().Record.ContainerID
	for i := range panes {
		panes[i].Allow = ""
		if e.PaneAllowed(cid, string(panes[i].ID)) {
			panes[i].Allow = "1"
		}
	}
	return panes, nil
}

// floorCache holds the policy floor of one instance, read again when the
// consent file changes. The file is the host's (other stem processes
// replace it by rename); the stamp is taken before the read, so what was
// read is at least as new as the stamp, and kept only once settled
// (internal/lib/filestamp).
type floorCache struct {
	mu       sync.Mutex
	instance string
	stamp    filestamp.Stamp
	floor    *agentpolicy.Policy
	err      error
}

// floorFor is the policy floor the student's host record holds for
// instance (nil: none recorded).
func (s *Server) floorFor(instance string) (*agentpolicy.Policy, error) {
	if s.consentErr != nil {
		return nil, s.consentErr
	}
	st := s.consent
	fc := &s.floor
	fc.mu.Lock()
	defer fc.mu.Unlock()
	start := time.Now()
	now, ok := filestamp.Lstat(st.Path())
	if ok && fc.instance == instance && fc.stamp == now {
		return fc.floor, fc.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := st.Get(ctx, instance)
	if !now.Settled(start) {
		now = filestamp.Stamp{}
	}
	fc.instance, fc.stamp, fc.floor, fc.err = instance, now, e.Floor, err
	return e.Floor, err
}
