package mcpserver

import (
	"context"

	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/tmux"
)

// The student's consents (panes open to assist-level keys, files marked
// editable) are read from the host's record (internal/consent), never
// from the container: its tmux options and Neovim buffer variables are
// written by whatever runs there.

// consents returns the host's record for the instance of c. An error
// (say, a damaged file) allows nothing.
func (s *Server) consents(ctx context.Context, c *conn) (consent.Entry, error) {
	st, err := consent.Open(s.dirs.State)
	if err != nil {
		return consent.Entry{}, err
	}
	return st.Get(ctx, c.target().Record.Instance)
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
