package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/verify"
)

// unsafeCardError refuses an effectful call on an instance whose card's
// git is not safe to run on the host (internal/cardgit): its .git is not
// the one the container was given read-only, or a repository is nested in
// the card. Whatever an agent did next (a build, an edit that gets run)
// would run beside that, and the student should deal with it first.
type unsafeCardError struct{ err error }

func (e *unsafeCardError) Error() string { return "nothing was done: " + e.err.Error() }
func (e *unsafeCardError) Unwrap() error { return e.err }

// cardGitGate checks t's card as `stemctl status` does. A card that
// cannot be checked is refused too (fail closed).
func cardGitGate(ctx context.Context, t verify.Target) error {
	pid := 0
	if t.Container.Running {
		pid = t.Container.Pid
	}
	err := cardgit.CheckRunning(ctx, t.Record.CardPath, t.Record.Git, pid)
	if err == nil {
		return nil
	}
	var ce *cardgit.Error
	if errors.As(err, &ce) {
		ce.Instance = t.Record.Instance
		return errcode.New(errcode.UnsafeCard, &unsafeCardError{err})
	}
	return errcode.New(errcode.UnsafeCard, &unsafeCardError{fmt.Errorf("the card's git could not be checked: %w", err)})
}
