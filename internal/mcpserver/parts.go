package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/nvim/rpcguard"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/tmux"
)

// The parts of a session a tool may need. Each can be down alone: a tool
// fails only when a part it uses is down, and says which and how to bring
// it back. The instance's identity (record, container, label, socket
// directory) is checked for every call whatever the parts' state.
const (
	partTmux     = "tmux"
	partEditor   = "editor"
	partDebugger = "debugger"
)

// States of a part in session_status.
const (
	partUp      = "up"
	partDown    = "down"    // not running, or not answering
	partRefused = "refused" // answers with what stem refuses (taken over, or planted)
)

// partDownError is a part of the instance that a call needs being down.
// Its text names the part and the command that brings it back; never a
// socket path, and never the part's own words (except a refusal's, which
// rpcguard states in stem's words).
type partDownError struct {
	part   string
	state  string
	reason string
	fix    string
	err    error
}

func (e *partDownError) Error() string { return e.reason + ": " + e.fix }

func (e *partDownError) Unwrap() error { return e.err }

// partOf classifies err from a call on rec's instance: the part that is
// down, or nil when err is about something else.
func partOf(rec registry.Record, err error) *partDownError {
	var pd *partDownError
	if errors.As(err, &pd) {
		return pd
	}
	up := "`" + rec.UpCommand() + "`"
	switch {
	case errors.Is(err, nvim.ErrRefused):
		what := "a message over stem's limits"
		var re *rpcguard.Error
		if errors.As(err, &re) {
			what = re.Error()
		}
		return &partDownError{part: partEditor, state: partRefused, err: err,
			reason: fmt.Sprintf("Neovim in instance %s is refused (%s)", rec.Instance, what),
			fix:    fmt.Sprintf("`%s --force` re-creates the instance with a new editor (this ends the student's shells and programs)", rec.UpCommand())}
	case errors.Is(err, nvim.ErrUnavailable) && (errors.Is(err, unixpin.ErrSymlink) || errors.Is(err, unixpin.ErrNotSocket)):
		return &partDownError{part: partEditor, state: partRefused, err: err,
			reason: fmt.Sprintf("Neovim's socket in instance %s is not a socket (something inside the container replaced it)", rec.Instance),
			fix:    fmt.Sprintf("`stemctl status %s` says how to repair the instance", rec.Instance)}
	case errors.Is(err, nvim.ErrUnavailable) && (errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)):
		return &partDownError{part: partEditor, state: partDown, err: err,
			reason: fmt.Sprintf("Neovim is not running in instance %s", rec.Instance),
			fix:    fmt.Sprintf("the student reopens it, or %s restarts it in the edit window", up)}
	case errors.Is(err, nvim.ErrUnavailable):
		return &partDownError{part: partEditor, state: partDown, err: err,
			reason: fmt.Sprintf("Neovim in instance %s does not answer (exiting, restarting, or hung)", rec.Instance),
			fix:    fmt.Sprintf("try again in a moment; if it stays so, %s restarts it", up)}
	case errors.Is(err, tmux.ErrClosed):
		// The server went while the call ran: the container stopped, or
		// the student's session was closed.
		return &partDownError{part: partTmux, state: partDown, err: err,
			reason: fmt.Sprintf("tmux (the student's terminal session) in instance %s ended during the call (the container stopped, or the session was closed)", rec.Instance),
			fix:    fmt.Sprintf("%s starts it again", up)}
	case errors.Is(err, gdbmi.ErrNotRunning):
		why := ""
		var nr *gdbmi.NotRunningError
		if errors.As(err, &nr) && nr.Reason != "" {
			why = " (" + nr.Reason + ")" // gdbmi's words, no path
		}
		return &partDownError{part: partDebugger, state: partDown, err: err,
			reason: fmt.Sprintf("the debugger is not running in instance %s%s", rec.Instance, why),
			fix:    fmt.Sprintf("the student starts it (the task's debug command), or `stemctl debug %s`", rec.Instance)}
	}
	return nil
}

// tmuxDown is dial's error when the instance's tmux does not answer: the
// whole session is gone with it (the editor runs in it).
func tmuxDown(rec registry.Record, err error) error {
	return errcode.New(errcode.PartDown, &partDownError{part: partTmux, state: partDown, err: err,
		reason: fmt.Sprintf("tmux (the student's terminal session) does not answer in instance %s", rec.Instance),
		fix:    fmt.Sprintf("`%s` starts the session again", rec.UpCommand())})
}

// explainPart restates err when it is a part being down (code part_down),
// and gives an editor waiting for the student its code; other errors are
// returned as they are.
func (s *Server) explainPart(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, nvim.ErrBlocked) {
		return errcode.New(errcode.EditorBusy, err)
	}
	c := s.current()
	if c == nil {
		return err
	}
	if pd := partOf(c.target().Record, err); pd != nil {
		if pd.err != nil && pd.err != err {
			s.logf("%s: %v", pd.part, pd.err) // the cause, socket paths included, for whoever reads stderr
		}
		return errcode.New(errcode.PartDown, pd)
	}
	return err
}

// partState is one part's entry in session_status.
type partState struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

func stateOf(rec registry.Record, err error) partState {
	if err == nil {
		return partState{State: partUp}
	}
	if pd := partOf(rec, err); pd != nil {
		return partState{State: pd.state, Reason: pd.reason, Fix: pd.fix}
	}
	return partState{State: partDown, Reason: oneLine(err.Error())}
}

// parts asks each part whether it answers: tmux through the live control
// client, the editor by (re)connecting, the debugger by dialing its bridge.
func (c *conn) parts(ctx context.Context) map[string]partState {
	rec := c.target().Record
	var terr error
	select {
	case <-c.tmux.Done():
		terr = tmuxDown(rec, errors.New("control client ended"))
	default:
	}
	_, gerr := c.gdb(ctx)
	return map[string]partState{
		partTmux:     stateOf(rec, terr),
		partEditor:   stateOf(rec, c.nvim.Connect(ctx)),
		partDebugger: stateOf(rec, gerr),
	}
}
