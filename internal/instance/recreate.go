package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
)

// nextSuffix makes the second name a re-created container takes while its
// predecessor still holds the first (Podman's names are unique).
const nextSuffix = "-next"

// otherName is the name a re-creation of a container named current takes.
func otherName(plan *Plan, current string) string {
	if current == plan.ContainerName {
		return plan.ContainerName + nextSuffix
	}
	return plan.ContainerName
}

// recreate replaces old with a new container for plan, transactionally:
// the new container is created under a second name while old is kept
// (stopped), and only once both its servers answer does old go (container
// and socket directory) and the new one take the usual name. If the new
// one fails (a broken image, an OCI runtime error), it is removed and old
// is started again: the record, the selection and the card still name old.
func (m *Manager) recreate(ctx context.Context, plan *Plan, old engine.Container, reason string) (UpResult, error) {
	// Everything create needs is checked before the old container goes.
	if err := plan.checkRecordedDevices(); err != nil {
		return UpResult{}, fmt.Errorf("%s must be re-created (%s), but %w", plan.Name, reason, err)
	}
	if _, err := cardstate.Ensure(plan.Resolved.CardPath, plan.Name); err != nil {
		return UpResult{}, fmt.Errorf("%s must be re-created (%s), but %w (nothing was changed)", plan.Name, reason, err)
	}
	if old.Running {
		if err := m.mayEndSession(ctx, plan, old, reason); err != nil {
			return UpResult{}, err
		}
	}
	oldDir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, old.ID)
	if err != nil {
		return UpResult{}, err
	}
	name := otherName(plan, old.Name)
	if err := m.clearLeftover(ctx, plan, name, old.ID); err != nil {
		return UpResult{}, fmt.Errorf("%s must be re-created (%s), but %w (nothing was changed)", plan.Name, reason, err)
	}
	m.progress("re-creating %s: %s", plan.Name, reason)
	// The instance directory is the bind source; after a reboot (a fresh
	// runtime directory) it may not exist.
	made, err := m.Layout.CreateLevels(sockets.Dir{Path: plan.InstanceDir})
	if err != nil {
		sockets.RemoveEmpty(made)
		return UpResult{}, err
	}
	cur, _ := selection.Current(m.Layout)
	follow := strings.HasPrefix(cur, plan.InstanceDir+string(filepath.Separator))
	ctr, dir, err := m.launch(ctx, plan, name, func(sockets.Dir) error {
		if !old.Running {
			return nil
		}
		// Stopped, not removed: it comes back if the new one fails. A
		// stop hangs up the panes, so the shells write their history.
		m.progress("stopping the old container %.12s (kept until the new one answers)", old.ID)
		if err := m.Engine.Stop(ctx, old.ID, oldStopTimeout); err != nil {
			return fmt.Errorf("stop the old container %.12s: %w", old.ID, err)
		}
		return nil
	})
	if err != nil {
		err = m.keepOld(ctx, plan, old, oldDir, err)
		sockets.RemoveEmpty(made)
		return UpResult{}, err
	}
	// The new container answers: now the old one goes.
	oldGone := true
	if err := m.Engine.Remove(ctx, old.ID, true); err != nil {
		oldGone = false
		m.progress("warning: the old container %.12s could not be removed (%v): remove it with `podman rm -f %.12s`", old.ID, err, old.ID)
	}
	removed, err := m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12())
	if err != nil {
		m.progress("warning: %v", err)
	}
	if oldGone && ctr.Name != plan.ContainerName {
		if err := m.Engine.Rename(ctx, ctr.ID, plan.ContainerName); err != nil {
			m.progress("warning: the new container keeps the name %s: %v", ctr.Name, err)
		} else {
			ctr.Name = plan.ContainerName
			if err := m.writeContainerJSON(plan, dir, ctr); err != nil {
				m.progress("warning: %v", err)
			}
		}
	}
	rec, err := m.record(ctx, plan, dir, ctr)
	if err != nil {
		return UpResult{}, fmt.Errorf("%s was re-created as container %.12s, but recording it failed: %w (the next `stemctl up` records it)", plan.Name, ctr.ID, err)
	}
	m.followSelection(plan, dir, follow)
	return UpResult{Record: rec, Action: Recreated, Reason: reason, Removed: removed}, nil
}

// oldStopTimeout bounds a graceful stop of a container being replaced.
const oldStopTimeout = 10 * time.Second

// clearLeftover makes name free for a re-created container: a container
// holding it that stem made for this instance is one an interrupted
// re-creation left (never recorded, since keep is the recorded one), and
// goes; anything else is the user's, and is refused.
func (m *Manager) clearLeftover(ctx context.Context, plan *Plan, name, keep string) error {
	c, err := m.Engine.Inspect(ctx, name)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.ID == keep || !m.ours(plan, c) {
		return fmt.Errorf("a container named %s, which stem needs for the new container, exists and is not a leftover of this instance; remove or rename it (podman rm %s)", name, name)
	}
	if rec, err := m.Registry.Get(ctx, plan.Name); err == nil && rec.ContainerID == c.ID {
		return fmt.Errorf("container %s (%.12s) is the one the registry names; not removing it", name, c.ID)
	}
	m.progress("removing %s (%.12s), left by an interrupted re-creation", name, c.ID)
	if err := m.Engine.Remove(ctx, c.ID, true); err != nil {
		return fmt.Errorf("remove the leftover container %s: %w", name, err)
	}
	if d, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, c.ID); err == nil {
		os.RemoveAll(d.Path)
	}
	return nil
}

// keepOld undoes a failed re-creation's effect on old: launch has removed
// the new container and its directory already; old, if it was running, is
// started again on its own directory, and cause is returned saying so.
func (m *Manager) keepOld(ctx context.Context, plan *Plan, old engine.Container, oldDir sockets.Dir, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if !old.Running {
		return fmt.Errorf("re-creating %s failed; its old container %.12s was kept as it was (%s), and nothing else changed: %w", plan.Name, old.ID, old.State, cause)
	}
	if c, err := m.Engine.Inspect(ctx, old.ID); err == nil && c.Running {
		return fmt.Errorf("re-creating %s failed; its old container %.12s was kept running, and nothing else changed: %w", plan.Name, old.ID, cause)
	}
	m.progress("re-creating %s failed; starting the old container %.12s again", plan.Name, old.ID)
	err := m.Layout.Create(oldDir)
	if err == nil {
		err = m.startStopped(ctx, plan, oldDir, old.ID)
	}
	if err != nil {
		return fmt.Errorf("re-creating %s failed, and starting its old container %.12s again failed too (%v); the registry still names it: `%s` tries again once the cause is fixed: %w", plan.Name, old.ID, err, UpCommand(m.recordOf(plan)), cause)
	}
	return fmt.Errorf("re-creating %s failed, so its old container %.12s was kept and started again (its shells and programs were restarted; the registry, the selection and the card still name it): %w", plan.Name, old.ID, cause)
}

// mayEndSession decides whether a running container may be re-created:
// that ends the student's shells and programs and loses nvim's unsaved
// buffers, so it never happens as a side effect of a command that only
// uses the instance, nor over unsaved work without --force.
func (m *Manager) mayEndSession(ctx context.Context, plan *Plan, old engine.Container, reason string) error {
	up := UpCommand(registry.Record{Profile: plan.Resolved.Profile.Name, Series: plan.Resolved.Series, Card: plan.Resolved.Card, Task: plan.Resolved.TaskID, Target: plan.Resolved.Target.Name})
	if plan.up.KeepRunning {
		return fmt.Errorf("%s must be re-created (%s), which ends the student's session (shells, running programs, unsaved editor buffers); nothing was changed: run `%s` to re-create it", plan.Name, reason, up)
	}
	if plan.up.Force || m.NvimModified == nil {
		return nil
	}
	dir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, old.ID)
	if err != nil {
		return err
	}
	names, err := m.NvimModified(ctx, dir.Nvim())
	if err != nil {
		return fmt.Errorf("%s must be re-created (%s), but %v; nothing was changed: if nothing in the editor needs saving, run `%s --force`", plan.Name, reason, err, up)
	}
	if len(names) > 0 {
		return fmt.Errorf("%s must be re-created (%s), but its editor has unsaved changes in %s; nothing was changed: save them (:wa in nvim), or run `%s --force` to discard them", plan.Name, reason, strings.Join(names, ", "), up)
	}
	return nil
}
