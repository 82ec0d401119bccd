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
	paneIDRE    = regexp.MustCompile(`^%[0-9]{1,9}$`)
	windowIDRE  = regexp.MustCompile(`^@[0-9]{1,9}$`)
	sessionRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	userOptRE   = regexp.MustCompile(`^@[A-Za-z0-9_-]{1,64}$`)
	formatVarRE = regexp.MustCompile(`^(@[A-Za-z0-9_-]{1,64}|[a-z][a-z0-9_]{0,63})$`)
)

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
