package instance

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/registry"
)

// checkGit stops Up before it changes anything when git on the host is not
// safe in the card (internal/cardgit): its .git is not the one rec was
// created with, or a repository is nested in it. Re-creating the
// container would record whatever is there now as the card's .git, so
// this is the student's to look at. It sets plan.Git to the .git now.
func (m *Manager) checkGit(ctx context.Context, plan *Plan, rec *registry.Record) error {
	card := plan.Resolved.CardPath
	var want []cardgit.Identity
	if rec != nil && rec.Git != nil {
		want = append(want, *rec.Git)
	}
	if err := cardgit.Check(ctx, card, want...); err != nil {
		var ce *cardgit.Error
		if errors.As(err, &ce) {
			ce.Instance = plan.Name
		}
		return fmt.Errorf("instance %s: %w (nothing was changed)", plan.Name, err)
	}
	if rec != nil && rec.Git == nil {
		m.progress("note: %s was made by an older stem, which gave the container the card's .git writable; check %s (hooks/, config) before running git there", plan.Name, cardgit.Path(card))
	}
	if id, err := cardgit.Inspect(card); err == nil {
		plan.Git = id
	}
	return nil
}

// prepareGit makes the card's .git ready to mount (an empty one for a card
// that is not a repository) and returns how to undo what it made.
func prepareGit(plan *Plan) (undo func(), err error) {
	card := plan.Resolved.CardPath
	_, err = cardgit.Inspect(card)
	made := errors.Is(err, os.ErrNotExist)
	if plan.Git, err = cardgit.Prepare(card); err != nil {
		return func() {}, err
	}
	return func() {
		if made {
			beneath.RemoveDir(card, ".git") // only while still empty
		}
	}, nil
}

// gitMounted checks that container id, just started, has the card's .git
// that plan recorded: Podman and the OCI runtime resolve the mount source
// by path at start, so a .git swapped on the host in between would show
// up here.
func (m *Manager) gitMounted(ctx context.Context, plan *Plan, id string) error {
	c, err := m.Engine.Inspect(ctx, id)
	if err != nil {
		return err
	}
	if err := cardgit.Mounted(c.Pid, plan.Resolved.CardPath, plan.Git); err != nil {
		return fmt.Errorf("%s: %w: the card's .git changed while the container started; check it (hooks/, config) before running git there", plan.Name, err)
	}
	return checkMapped(plan, c.Pid)
}

// gitRecord is the identity a record keeps (none when unknown).
func gitRecord(id cardgit.Identity) *cardgit.Identity {
	if id.Kind == "" {
		return nil
	}
	return &id
}

// gitStatus adds what is unsafe about the instance's card to st.
func gitStatus(ctx context.Context, st *Status) {
	rec := st.Record
	if rec.CardPath == "" {
		return
	}
	pid := 0
	if st.Container != nil && st.Container.Running {
		pid = st.Container.Pid
	}
	err := cardgit.CheckRunning(ctx, rec.CardPath, rec.Git, pid)
	if err == nil {
		if pid > 0 {
			if fs, n, _ := cardgit.Racy(ctx, rec.CardPath, 5); n > 0 {
				st.GitNote = cardgit.RacyNote(fs, n)
			}
		}
		return
	}
	var ce *cardgit.Error
	if errors.As(err, &ce) {
		ce.Instance = rec.Instance
		st.Git = ce.Problems
	}
	st.Problems = append(st.Problems, err.Error())
	if st.State == StateRunning {
		st.State = StateUnhealthy
	}
	// up refuses until the card is dealt with: the hint must not send the
	// student there first.
	st.Hint = "deal with the card's git first (the problem above says how); then `" + UpCommand(rec) + "` works again"
}
