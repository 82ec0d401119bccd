// Package errcode is the one table of stable error codes stem gives to
// programs: an MCP client reads them in a tool error's structured content,
// a teacher's stemctl in the gate's stderr line. A code names what went
// wrong and so what to do; the prose beside it may change, the code does
// not. Codes are never removed or renamed: a client may act on any of them.
package errcode

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Code is one stable error code (lower case, words joined by '_').
type Code string

// The codes. Refusals (Info.Refusal) are a request stem turned down on
// purpose: nothing was done and the audit log has it as refused. The
// others are failures: something the request needed did not work.
const (
	BadInput        Code = "bad_input"
	Stale           Code = "stale"
	TooLarge        Code = "too_large"
	OutsideCard     Code = "outside_card"
	NotEditable     Code = "not_editable"
	PaneNotAllowed  Code = "pane_not_allowed"
	NotGranted      Code = "not_granted"
	PolicyRefused   Code = "policy_refused"
	ApprovalRefused Code = "approval_refused"
	ApprovalExpired Code = "approval_expired"
	NoWatcher       Code = "no_watcher"
	UnsafeCard      Code = "unsafe_card"
	NoProgram       Code = "no_program"
	NoInstance      Code = "no_instance"
	InstanceDown    Code = "instance_down"
	Unverified      Code = "unverified"
	PartDown        Code = "part_down"
	EditorBusy      Code = "editor_busy"
	Timeout         Code = "timeout"
	NotAudited      Code = "not_audited"
	Revoked         Code = "revoked"
	Expired         Code = "expired"
	GrantChanged    Code = "grant_changed"
	BadSetup        Code = "bad_setup"
	Unreachable     Code = "unreachable"
	Internal        Code = "internal"
)

// Info is what the table says of a code.
type Info struct {
	Code    Code
	Refusal bool // turned down on purpose (audited as refused), not a failure
	When    string
}

// table lists every code once; docs/errors.md explains each (a test
// holds the two together).
var table = []Info{
	{BadInput, true, "the call's arguments are wrong: a type, a range, a missing or contradictory argument"},
	{Stale, true, "what the call was based on changed (a buffer's tick, a capture cursor from another session)"},
	{TooLarge, true, "an argument or what it names is over one of stem's limits"},
	{OutsideCard, true, "a path or buffer is outside the card repository (or resolves there through a symlink)"},
	{NotEditable, true, "the file is not editable through MCP at this level"},
	{PaneNotAllowed, true, "the pane is not open to assist-level keys"},
	{NotGranted, true, "the access grant does not cover this instance or client address"},
	{PolicyRefused, true, "the task's agent policy does not allow this tool or call"},
	{ApprovalRefused, true, "the student said no to this call"},
	{ApprovalExpired, true, "the student did not answer the approval in time"},
	{NoWatcher, true, "the call needs the student's approval and nobody on the host can answer"},
	{UnsafeCard, true, "the card's git is not safe to run on the host; effects are refused"},
	{NoProgram, true, "there is no program under the debugger to control"},
	{NoInstance, false, "no instance is selected, or the named one is not registered"},
	{InstanceDown, false, "the instance's container or its tmux is not running"},
	{Unverified, false, "the instance failed verification (socket directory, container, label)"},
	{PartDown, false, "a part the tool needs (editor, debugger, tmux) is down or refused"},
	{EditorBusy, false, "Neovim is waiting for the student's input"},
	{Timeout, false, "the call did not finish within its time"},
	{NotAudited, false, "the audit log cannot take the entry this needs; nothing was done"},
	{Revoked, true, "the grant of this key no longer exists"},
	{Expired, true, "the grant of this key expired"},
	{GrantChanged, true, "the grant changed during the session, which ended"},
	{BadSetup, false, "the student's side is set up wrong (forced command, grants file, environment)"},
	{Unreachable, false, "the teacher's side has no working session with that student: not connected, or the connection failed or ended"},
	{Internal, false, "anything else: a fault, not something the client can fix"},
}

// All returns the table, in order.
func All() []Info { return append([]Info(nil), table...) }

// Lookup returns the table's entry for c.
func Lookup(c Code) (Info, bool) {
	for _, in := range table {
		if in.Code == c {
			return in, true
		}
	}
	return Info{}, false
}

// IsRefusal reports whether c is a refusal.
func IsRefusal(c Code) bool {
	in, ok := Lookup(c)
	return ok && in.Refusal
}

// Error is an error with its code. Refusal sites return it (or wrap it);
// Of finds it with errors.As.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New gives err the code c.
func New(c Code, err error) error { return &Error{Code: c, Err: err} }

// Errorf is New with a formatted error (%w wraps as in fmt.Errorf).
func Errorf(c Code, format string, args ...any) error {
	return &Error{Code: c, Err: fmt.Errorf(format, args...)}
}

// Of returns err's code: the outermost Error in its chain, Timeout for a
// deadline, "" for nil, Internal for anything else.
func Of(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Internal
}

// Refused reports whether err is a refusal.
func Refused(err error) bool { return IsRefusal(Of(err)) }

// Tag is how a line of text carries a code for another process: "[code] ".
func Tag(c Code) string { return "[" + string(c) + "] " }

// Cut reads a line that starts with a Tag: its code and the rest. ok is
// false when the line has no well-formed tag; the code may be one this
// table does not have (a newer program's), which the caller treats as
// unknown.
func Cut(line string) (c Code, rest string, ok bool) {
	if !strings.HasPrefix(line, "[") {
		return "", line, false
	}
	end := strings.IndexByte(line, ']')
	if end < 2 || end > 40 || !wellFormed(line[1:end]) {
		return "", line, false
	}
	return Code(line[1:end]), strings.TrimPrefix(line[end+1:], " "), true
}

func wellFormed(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return s != "" && s[0] != '_' && s[len(s)-1] != '_'
}

// Wire is a tool error's structured content:
// {"error":{"code":"not_editable","message":"..."}}. The message is the
// error's text content again, so a client needs only one of the two.
type Wire struct {
	Error WireError `json:"error"`
}

// WireError is Wire's one field.
type WireError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}
