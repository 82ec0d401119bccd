package tmux

import (
	"errors"
	"fmt"
	"strings"
)

// Errors callers can test with errors.Is.
var (
	// ErrClosed: the control connection is gone (the tmux client exited,
	// the server died, or Close was called). Redial.
	ErrClosed = errors.New("tmux: control connection closed")
	// ErrVersionMismatch: the tmux client that was started cannot or should
	// not talk to this server (different protocol or version). Start the
	// client inside the container instead (Options.Command).
	ErrVersionMismatch = errors.New("tmux: client and server versions differ")
	// ErrNoServer: nothing listens on the socket.
	ErrNoServer = errors.New("tmux: no server on the socket")
	// ErrNoSession: the server runs but has no such session.
	ErrNoSession = errors.New("tmux: no such session")
	// ErrNoPane: the pane does not exist (any more).
	ErrNoPane = errors.New("tmux: no such pane")
	// ErrInvalidArgument: a caller-supplied value failed validation before
	// anything was sent to tmux.
	ErrInvalidArgument = errors.New("tmux: invalid argument")
	// ErrProtocol: the control stream broke the rules we rely on.
	ErrProtocol = errors.New("tmux: control protocol error")
	// ErrTimeout: a Wait or Run did not finish in time.
	ErrTimeout = errors.New("tmux: timed out")

	// ErrPaneDead: the pane's program has exited (remain-on-exit).
	ErrPaneDead = errors.New("tmux: pane is dead")
	// ErrPaneInMode: the pane is in copy/view mode, so keys would drive the
	// mode, not the program.
	ErrPaneInMode = errors.New("tmux: pane is in a mode (copy mode?)")
	// ErrSynchronized: synchronize-panes is on in the pane's window, so keys
	// would reach every pane of the window.
	ErrSynchronized = errors.New("tmux: synchronize-panes is on in the pane's window")
	// ErrNotAtPrompt: Run found the pane running a program, not a shell.
	ErrNotAtPrompt = errors.New("tmux: pane is not at a shell prompt")
	// ErrNoIntegration: the shell did not answer the stem prompt probe
	// (not bash, or stem-prompt.sh not sourced).
	ErrNoIntegration = errors.New("tmux: no stem shell integration at the prompt")
	// ErrPromptBusy: someone has typed text at the prompt that was not sent.
	ErrPromptBusy = errors.New("tmux: the prompt already holds typed text")
	// ErrIncompleteCommand: bash asked for more input (PS2) after the
	// command was typed; the line was cancelled with C-c.
	ErrIncompleteCommand = errors.New("tmux: command is incomplete (shell asked for a continuation line)")
	// ErrNotInSession: the pane is not in the session this client is
	// attached to, so its output cannot be observed.
	ErrNotInSession = errors.New("tmux: pane is not in the attached session")
)

// CommandError is an error tmux reported for one of our commands
// (%error block).
type CommandError struct {
	Command string // the command we sent (never contains caller text verbatim)
	Message string // tmux's message
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("tmux %s: %s", e.Command, e.Message)
}

// Is maps well-known tmux messages to sentinel errors.
func (e *CommandError) Is(target error) bool {
	switch target {
	case ErrNoPane:
		return strings.HasPrefix(e.Message, "can't find pane")
	case ErrNoSession:
		return strings.HasPrefix(e.Message, "can't find session")
	}
	return false
}
