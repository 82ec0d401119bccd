package tmux

import (
	"fmt"
	"regexp"
)

// PaneID is a tmux pane id such as "%3". Only validated ids ever reach a
// tmux command line; a pane id is never a name that tmux would resolve by
// prefix or pattern.
type PaneID string

// WindowID is a tmux window id such as "@2".
type WindowID string

var (
	paneIDRE   = regexp.MustCompile(`^%[0-9]{1,9}$`)
	windowIDRE = regexp.MustCompile(`^@[0-9]{1,9}$`)
	// Unbounded repetitions, the lengths checked by the valid* functions:
	// a bounded one such as {1,64} compiles to 64 copies of the class,
	// which every start-up of stem-mcp and stemctl paid.
	sessionRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	userOptRE   = regexp.MustCompile(`^@[A-Za-z0-9_-]+$`)
	formatVarRE = regexp.MustCompile(`^(@[A-Za-z0-9_-]+|[a-z][a-z0-9_]*)$`)
)

// validSession: 1-64 of [A-Za-z0-9_-].
func validSession(s string) bool { return len(s) <= 64 && sessionRE.MatchString(s) }

// validUserOpt: @ and 1-64 of [A-Za-z0-9_-].
func validUserOpt(s string) bool { return len(s) <= 65 && userOptRE.MatchString(s) }

// validFormatVar: a user option, or a format name of 1-64 of [a-z0-9_]
// starting with a letter.
func validFormatVar(s string) bool {
	return (len(s) <= 64 || len(s) == 65 && s[0] == '@') && formatVarRE.MatchString(s)
}

// ParsePaneID validates s as a pane id.
func ParsePaneID(s string) (PaneID, error) {
	if !paneIDRE.MatchString(s) {
		return "", fmt.Errorf("%w: pane id %q (want %%N)", ErrInvalidArgument, s)
	}
	return PaneID(s), nil
}

// ParseWindowID validates s as a window id.
func ParseWindowID(s string) (WindowID, error) {
	if !windowIDRE.MatchString(s) {
		return "", fmt.Errorf("%w: window id %q (want @N)", ErrInvalidArgument, s)
	}
	return WindowID(s), nil
}

func (p PaneID) check() error {
	_, err := ParsePaneID(string(p))
	return err
}

func (w WindowID) check() error {
	_, err := ParseWindowID(string(w))
	return err
}
