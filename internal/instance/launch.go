package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
)

// recordOf is the part of a record UpCommand needs.
func (m *Manager) recordOf(plan *Plan) registry.Record {
	r := plan.Resolved
	return registry.Record{Profile: r.Profile.Name, Series: r.Series, Card: r.Card, Task: r.TaskID, Target: r.Target.Name}
}

// launch creates a container for plan named name, makes its socket
// directory and container.json, runs beforeStart, starts it and waits until
// both servers answer. On any failure it removes the container and its
// socket directory again; the caller undoes the rest. A container the
// engine half started before it was killed (engine.ErrHalfStarted) is
// removed and made once more.
func (m *Manager) launch(ctx context.Context, plan *Plan, name string, beforeStart func(sockets.Dir) error) (engine.Container, sockets.Dir, error) {
	ctr, dir, err := m.launchOnce(ctx, plan, name, beforeStart)
	if errors.Is(err, engine.ErrHalfStarted) && ctx.Err() == nil {
		m.progress("the Podman service stopped while it started %s; creating it again", plan.Name)
		ctr, dir, err = m.launchOnce(ctx, plan, name, beforeStart)
	}
	return ctr, dir, err
}

func (m *Manager) launchOnce(ctx context.Context, plan *Plan, name string, beforeStart func(sockets.Dir) error) (engine.Container, sockets.Dir, error) {
	spec := plan.Spec
	spec.Name = name
	undoGit, err := prepareGit(plan)
	if err != nil {
		return engine.Container{}, sockets.Dir{}, err
	}
	if err := m.grantCard(plan); err != nil {
		undoGit()
		return engine.Container{}, sockets.Dir{}, err
	}
	m.progress("creating %s from %s", plan.Name, plan.Resolved.Profile.Image)
	slow := time.AfterFunc(3*time.Second, func() {
		if plan.IDMap != nil {
			m.progress("still creating %s: the first container of an image on these ids waits for Podman to prepare a copy of the image (once, several seconds)", plan.Name)
		}
	})
	// Creation runs to its end even when the caller is interrupted:
	// Podman may make the container after the request is cut off, and
	// then no record would name it. The interruption is acted on right
	// after, by removing what was made.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	id, err := m.Engine.Create(cctx, spec)
	ccancel()
	slow.Stop()
	if err != nil {
		undoGit()
		return engine.Container{}, sockets.Dir{}, fmt.Errorf("create %s: %w", plan.Name, err)
	}
	var made []string
	fail := func(err error) (engine.Container, sockets.Dir, error) {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := m.Engine.Remove(c, id, true); rerr != nil {
			m.progress("warning: removing the failed container %.12s: %v", id, rerr)
		}
		// Only the container's own directory (the instance directory and
		// above are the caller's).
		for _, p := range made {
			if filepath.Base(p) == id[:12] {
				os.RemoveAll(p)
			}
		}
		undoGit()
		return engine.Container{}, sockets.Dir{}, err
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("create %s: interrupted: %w", plan.Name, err))
	}
	dir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, id)
	if err != nil {
		return fail(err)
	}
	made, err = m.Layout.CreateLevels(dir)
	if err != nil {
		return fail(err)
	}
	if err := m.grantSockets(plan, dir); err != nil {
		return fail(err)
	}
	ctr, err := m.Engine.Inspect(ctx, id)
	if err != nil {
		return fail(err)
	}
	if err := m.writeContainerJSON(plan, dir, ctr); err != nil {
		return fail(err)
	}
	if beforeStart != nil {
		if err := beforeStart(dir); err != nil {
			return fail(err)
		}
	}
	m.progress("starting %s (%.12s)", plan.Name, id)
	if err := m.Engine.Start(ctx, id); err != nil {
		return fail(fmt.Errorf("start %s: %w", plan.Name, err))
	}
	if err := m.waitSockets(ctx, dir, id); err != nil {
		return fail(m.withLog(ctx, id, err))
	}
	if ctr, err = m.Engine.Inspect(ctx, id); err != nil {
		return fail(err)
	}
	if err := cardgit.Mounted(ctr.Pid, plan.Resolved.CardPath, plan.Git); err != nil {
		return fail(fmt.Errorf("%s: %w: the card's .git changed while the container was created; check it (hooks/, config) before running git there", plan.Name, err))
	}
	if err := checkMapped(plan, ctr.Pid); err != nil {
		return fail(err)
	}
	return ctr, dir, nil
}

// followSelection moves the MCP selection to dir when it named this
// instance's previous container (verification then holds the new
// container to the same checks).
func (m *Manager) followSelection(plan *Plan, dir sockets.Dir, follow bool) {
	if !follow {
		return
	}
	if err := selection.Select(m.Layout, dir); err != nil {
		m.progress("warning: the MCP selection still names the old container: %v (run `stemctl mcp select %s`)", err, plan.Name)
	} else {
		m.progress("the MCP selection follows %s to its new container", plan.Name)
	}
}

// create makes plan's first container (or one whose predecessor is gone).
// When it fails, what it made goes again: the container, its socket
// directory, the runtime levels above it and the card's state directory,
// where they did not exist before.
func (m *Manager) create(ctx context.Context, plan *Plan, action Action, reason string) (UpResult, error) {
	r := plan.Resolved
	if err := plan.checkRecordedDevices(); err != nil {
		return UpResult{}, err
	}
	// The instance directory must exist before create (bind source).
	made, err := m.Layout.CreateLevels(sockets.Dir{Path: plan.InstanceDir})
	if err != nil {
		sockets.RemoveEmpty(made)
		return UpResult{}, err
	}
	_, undoCard, err := cardstate.Prepare(r.CardPath, plan.Name)
	if err != nil {
		sockets.RemoveEmpty(made)
		return UpResult{}, err
	}
	undo := func() {
		undoCard()
		sockets.RemoveEmpty(made)
	}
	cur, _ := selection.Current(m.Layout)
	follow := strings.HasPrefix(cur, plan.InstanceDir+string(filepath.Separator))
	var removed []string
	ctr, dir, err := m.launch(ctx, plan, plan.ContainerName, func(dir sockets.Dir) error {
		// A predecessor's directories (its container is gone) go before
		// the new container can see them.
		var err error
		removed, err = m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12())
		return err
	})
	if err != nil {
		undo()
		return UpResult{}, err
	}
	rec, err := m.record(ctx, plan, dir, ctr)
	if err != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		m.Engine.Remove(c, ctr.ID, true)
		os.RemoveAll(dir.Path)
		undo()
		return UpResult{}, err
	}
	m.followSelection(plan, dir, follow)
	return UpResult{Record: rec, Action: action, Reason: reason, Removed: removed}, nil
}

func (m *Manager) writeContainerJSON(plan *Plan, dir sockets.Dir, c engine.Container) error {
	name := c.Name
	if name == "" {
		name = plan.ContainerName
	}
	return sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{
		ID:        c.ID,
		Name:      name,
		Instance:  plan.Name,
		Profile:   plan.Resolved.Profile.Name,
		Image:     plan.Resolved.Profile.Image,
		Labels:    plan.Spec.Labels,
		Created:   c.Created.UTC().Format(time.RFC3339Nano),
		SocketDir: dir.Path,
	})
}

func (m *Manager) record(ctx context.Context, plan *Plan, dir sockets.Dir, c engine.Container) (registry.Record, error) {
	r := plan.Resolved
	pol, err := m.settlePolicy(ctx, plan.Name, c.ID, r.Policy, r.Editable)
	if err != nil {
		return registry.Record{}, err
	}
	rec := registry.Record{
		Instance:    plan.Name,
		Profile:     r.Profile.Name,
		Series:      r.Series,
		Card:        r.Card,
		Task:        r.TaskID,
		Target:      r.Target.Name,
		ContainerID: c.ID,
		Image:       r.Profile.Image,
		ConfigHash:  plan.ConfigHash,
		Schema:      labels.SchemaNumber(),
		SocketDir:   dir.Path,
		ThreadKey:   plan.ThreadKey,
		InstanceKey: plan.InstanceKey,
		CardPath:    r.CardPath,
		Workspace:   r.Workspace,
		Labels:      plan.Spec.Labels,
		Devices:     plan.Devices,
		Git:         gitRecord(plan.Git),
		Policy:      &pol,
		Created:     c.Created.UTC(),
	}
	if err := m.Registry.Put(ctx, rec); err != nil {
		return rec, err
	}
	// The card-side copy is informational; a failure there must not undo a
	// working instance, but it is reported.
	if err := cardstate.Write(r.CardPath, plan.Name, rec); err != nil {
		m.progress("warning: %v", err)
	}
	return rec, nil
}

// withLog adds the container's last output (stem-init says why it could not
// start the servers) to err; the container may be removed right after.
func (m *Manager) withLog(ctx context.Context, id string, err error) error {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	tail, lerr := m.Engine.LogTail(c, id, 20)
	tail = strings.TrimSpace(tail)
	if lerr != nil || tail == "" {
		return err
	}
	return fmt.Errorf("%w\nthe container's last output:\n%s", err, tail)
}

// waitSockets waits until both servers answer in dir.
func (m *Manager) waitSockets(ctx context.Context, dir sockets.Dir, id string) error {
	timeout := m.SocketTimeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	delay := 2 * time.Millisecond
	var last error
	for {
		err := m.probe(ctx, dir, id)
		if err == nil {
			err = groupOpen(dir)
		}
		if err == nil {
			return nil
		}
		// A probe our own deadline cut short says only that; the one
		// before it says what was missing. The clock, not ctx.Err(): a
		// dial's own timer can report the deadline a moment before the
		// context's does.
		if last == nil || time.Now().Before(deadline) {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tmux and nvim did not answer in %s within %s: %v", dir.Path, timeout, last)
		case <-time.After(delay):
		}
		if delay < 25*time.Millisecond {
			delay *= 2
		}
	}
}

// groupOpen says whether the container's init has finished setting up
// tmux's socket: tmux makes it 0600, and the init opens it to the group
// (the mask of the ACL that lets the student's entry in) once the server
// lets the host's clients in. Neovim may answer before that.
func groupOpen(dir sockets.Dir) error {
	fi, err := os.Stat(dir.Tmux())
	if err != nil {
		return &serverDown{"tmux", err}
	}
	if fi.Mode().Perm()&0o060 != 0o060 {
		return &serverDown{"tmux", fmt.Errorf("the container has not opened %s to the group yet (mode %v)", dir.Tmux(), fi.Mode().Perm())}
	}
	return nil
}

// startStopped starts container id, stopped, on its socket directory dir:
// the sockets of its previous run are dead and go first, so the wait sees
// the new servers'. A container whose card .git is not mounted as planned
// is stopped again.
func (m *Manager) startStopped(ctx context.Context, plan *Plan, dir sockets.Dir, id string) error {
	for _, s := range []string{sockets.TmuxSocket, sockets.NvimSocket, sockets.GDBSocket} {
		dir.Remove(s)
	}
	if err := m.Engine.Start(ctx, id); err != nil {
		return fmt.Errorf("start %s: %w", plan.Name, err)
	}
	if err := m.waitSockets(ctx, dir, id); err != nil {
		return m.withLog(ctx, id, err)
	}
	if err := m.gitMounted(ctx, plan, id); err != nil {
		m.Engine.Stop(context.WithoutCancel(ctx), id, 0)
		return fmt.Errorf("%w; stem stopped the container", err)
	}
	return nil
}
