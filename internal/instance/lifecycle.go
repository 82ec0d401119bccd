package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
)

// Down stops an instance's container; its record and state stay.
func (m *Manager) Down(ctx context.Context, ref string, timeout time.Duration) (registry.Record, error) {
	rec, unlock, err := m.findLocked(ctx, ref)
	if err != nil {
		return rec, err
	}
	defer unlock()
	if err := m.Engine.Stop(ctx, rec.ContainerID, timeout); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return rec, fmt.Errorf("stop %s: %w", rec.Instance, err)
	}
	return rec, nil
}

// Unsaved lists the unsaved buffers of the instance's editor: what
// stopping it would discard. None when there is no editor listening (it
// is closed, or the container is not running), or when the manager has
// no way to ask; an error when one is there and does not say (it waits
// at a prompt, or answers what stem refuses): its buffers cannot be
// vouched for.
func (m *Manager) Unsaved(ctx context.Context, rec registry.Record) ([]string, error) {
	if m.NvimModified == nil {
		return nil, nil
	}
	return m.NvimModified(ctx, rec.Dir().Nvim())
}

// DiscardEdits ends the instance's editor without saving, before a stop
// told to discard its unsaved changes, so no swap file outlives them.
func (m *Manager) DiscardEdits(ctx context.Context, rec registry.Record) {
	if m.NvimQuit != nil {
		m.NvimQuit(ctx, rec.Dir().Nvim())
	}
}

// Remove deletes the container, its socket directories, its registry record,
// and the selection if it pointed there. The card repository is untouched.
func (m *Manager) Remove(ctx context.Context, ref string) (registry.Record, error) {
	rec, unlock, err := m.findLocked(ctx, ref)
	if err != nil {
		return rec, err
	}
	defer unlock()
	if err := m.Engine.Remove(ctx, rec.ContainerID, true); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return rec, fmt.Errorf("remove %s: %w", rec.Instance, err)
	}
	if cur, err := selection.Current(m.Layout); err == nil && cur == filepath.Clean(rec.SocketDir) {
		if err := selection.Clear(m.Layout); err != nil {
			return rec, err
		}
	}
	if _, err := m.Layout.RemoveStale(rec.ThreadKey, rec.InstanceKey, ""); err != nil {
		return rec, err
	}
	os.Remove(m.Layout.InstanceDir(rec.ThreadKey, rec.InstanceKey))
	// The student's consents and the policy floor go with the instance:
	// `rm` + `up` is one of the two ways to start from the card's policy.
	st, err := m.Consents()
	if err == nil {
		err = st.Delete(ctx, rec.Instance)
	}
	if err != nil {
		return rec, fmt.Errorf("remove %s: %w", rec.Instance, err)
	}
	return rec, m.Registry.Delete(ctx, rec.Instance)
}

// Running returns the record of a running instance, or an error that says
// how to start it.
func (m *Manager) Running(ctx context.Context, ref string) (registry.Record, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return rec, err
	}
	c, err := m.Engine.Inspect(ctx, rec.ContainerID)
	if errors.Is(err, engine.ErrNotFound) {
		return rec, fmt.Errorf("instance %s: its container %.12s no longer exists: run `%s` to re-create it", rec.Instance, rec.ContainerID, UpCommand(rec))
	}
	if err != nil {
		return rec, err
	}
	if c.Labels[labels.Instance] != rec.Instance {
		return rec, fmt.Errorf("instance %s: container %.12s carries instance label %q", rec.Instance, c.ID, c.Labels[labels.Instance])
	}
	if !c.Running {
		return rec, fmt.Errorf("instance %s is %s: run `%s` to start it", rec.Instance, c.State, UpCommand(rec))
	}
	return rec, nil
}

// Exec runs a process in a running instance and returns its exit code.
func (m *Manager) Exec(ctx context.Context, ref string, spec engine.ExecSpec) (int, error) {
	rec, err := m.Running(ctx, ref)
	if err != nil {
		return -1, err
	}
	return m.Engine.Exec(ctx, rec.ContainerID, spec)
}

// findLocked finds ref's record and takes its instance lock, so nothing
// else brings the instance up or down meanwhile; the caller unlocks.
func (m *Manager) findLocked(ctx context.Context, ref string) (registry.Record, func(), error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return rec, nil, err
	}
	unlock, err := m.Registry.LockInstance(ctx, rec.Instance)
	if err != nil {
		return rec, nil, err
	}
	return rec, unlock, nil
}
