package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

// Manager owns instance lifecycles.
type Manager struct {
	Engine    engine.Engine
	Registry  *registry.Registry
	Layout    sockets.Layout
	MCPBinary string
	// TmuxProbe and NvimProbe check that a server answers on a socket.
	TmuxProbe verify.Probe
	NvimProbe verify.Probe
	// Progress receives one line per step of long work (may be io.Discard).
	Progress io.Writer
	// SocketTimeout bounds the wait for both servers after a start.
	SocketTimeout time.Duration
}

// Action says what Up did.
type Action string

const (
	Reused    Action = "reused"
	Created   Action = "created"
	Recreated Action = "recreated"
	Started   Action = "started"
)

// UpResult reports an Up.
type UpResult struct {
	Record   registry.Record `json:"record"`
	Action   Action          `json:"action"`
	Reason   string          `json:"reason,omitempty"`
	Removed  []string        `json:"removed_socket_dirs,omitempty"`
	Duration time.Duration   `json:"duration_ns"`
}

func (m *Manager) progress(format string, args ...any) {
	if m.Progress != nil {
		fmt.Fprintf(m.Progress, format+"\n", args...)
	}
}

// Up makes the instance for r exist, run, and answer on both sockets,
// reusing a healthy container whose config hash and schema match.
func (m *Manager) Up(ctx context.Context, r *workspace.Resolved, devices []string) (UpResult, error) {
	start := time.Now()
	img, err := m.Engine.ImageInspect(ctx, r.Profile.Image)
	if err != nil {
		return UpResult{}, fmt.Errorf("image for profile %s: %w", r.Profile.Name, err)
	}
	plan, err := NewPlan(r, PlanOptions{Layout: m.Layout, ImageID: img.ID, MCPBinary: m.MCPBinary, Devices: devices})
	if err != nil {
		return UpResult{}, err
	}
	res, err := m.up(ctx, plan)
	res.Duration = time.Since(start)
	return res, err
}

func (m *Manager) up(ctx context.Context, plan *Plan) (UpResult, error) {
	// Instance names are per account: the same task in another workspace
	// would take over this record.
	if rec, err := m.Registry.Get(ctx, plan.Name); err == nil && rec.Workspace != plan.Resolved.Workspace {
		return UpResult{}, fmt.Errorf("instance %s belongs to workspace %s, not %s: remove it first with `stemctl rm %s`", plan.Name, rec.Workspace, plan.Resolved.Workspace, plan.Name)
	}
	existing, err := m.Engine.Inspect(ctx, plan.ContainerName)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		action := Created
		reason := ""
		if _, gerr := m.Registry.Get(ctx, plan.Name); gerr == nil {
			action, reason = Recreated, "its container was removed outside stem"
		}
		return m.create(ctx, plan, action, reason)
	case err != nil:
		return UpResult{}, err
	}
	if existing.Labels[labels.Managed] != "true" || existing.Labels[labels.Workspace] != plan.Resolved.Workspace {
		return UpResult{}, fmt.Errorf("a container named %s exists but stem did not create it for this workspace; remove or rename it (podman rm %s)", plan.ContainerName, plan.ContainerName)
	}
	if existing.Labels[labels.Schema] != labels.SchemaVersion {
		return m.recreate(ctx, plan, existing, fmt.Sprintf("its schema %q differs from %q", existing.Labels[labels.Schema], labels.SchemaVersion))
	}
	if existing.Labels[labels.ConfigHash] != plan.ConfigHash {
		return m.recreate(ctx, plan, existing, "its configuration changed (image, mounts, devices, limits or stem-mcp)")
	}
	dir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, existing.ID)
	if err != nil {
		return UpResult{}, err
	}
	if !existing.Running {
		m.progress("starting %s (%s)", plan.Name, existing.State)
		if err := m.Layout.Create(dir); err != nil {
			return UpResult{}, err
		}
		if _, err := m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12()); err != nil {
			return UpResult{}, err
		}
		// Sockets left by the previous run are dead; remove them so the
		// wait below sees the new servers' sockets.
		for _, s := range []string{dir.Tmux(), dir.Nvim(), dir.GDB()} {
			os.Remove(s)
		}
		if err := m.writeContainerJSON(plan, dir, existing); err != nil {
			return UpResult{}, err
		}
		if err := m.Engine.Start(ctx, existing.ID); err != nil {
			return UpResult{}, fmt.Errorf("start %s: %w", plan.Name, err)
		}
		if err := m.waitSockets(ctx, dir); err != nil {
			return UpResult{}, err
		}
		rec, err := m.record(ctx, plan, dir, existing)
		return UpResult{Record: rec, Action: Started}, err
	}
	if err := m.Layout.Check(dir); err != nil {
		return m.recreate(ctx, plan, existing, "its socket directory is unusable: "+err.Error())
	}
	if err := m.probe(ctx, dir); err != nil {
		return m.recreate(ctx, plan, existing, "its servers do not answer: "+err.Error())
	}
	rec, err := m.Registry.Get(ctx, plan.Name)
	if err != nil || rec.ContainerID != existing.ID || rec.SocketDir != dir.Path {
		rec, err = m.record(ctx, plan, dir, existing)
		if err != nil {
			return UpResult{}, err
		}
	}
	return UpResult{Record: rec, Action: Reused}, nil
}

func (m *Manager) recreate(ctx context.Context, plan *Plan, old engine.Container, reason string) (UpResult, error) {
	m.progress("re-creating %s: %s", plan.Name, reason)
	if err := m.Engine.Remove(ctx, old.ID, true); err != nil {
		return UpResult{}, fmt.Errorf("remove old container %.12s: %w", old.ID, err)
	}
	return m.create(ctx, plan, Recreated, reason)
}

func (m *Manager) create(ctx context.Context, plan *Plan, action Action, reason string) (UpResult, error) {
	r := plan.Resolved
	// The instance directory must exist before create (bind source).
	probeDir, _ := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, zeroID)
	if err := m.Layout.Create(sockets.Dir{Path: filepath.Dir(probeDir.Path)}); err != nil {
		return UpResult{}, err
	}
	if _, err := cardstate.Ensure(r.CardPath, plan.Name); err != nil {
		return UpResult{}, err
	}
	m.progress("creating %s from %s", plan.Name, r.Profile.Image)
	id, err := m.Engine.Create(ctx, plan.Spec)
	if err != nil {
		return UpResult{}, fmt.Errorf("create %s: %w", plan.Name, err)
	}
	cleanup := func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		m.Engine.Remove(c, id, true)
		m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, "")
	}
	dir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, id)
	if err != nil {
		cleanup()
		return UpResult{}, err
	}
	if err := m.Layout.Create(dir); err != nil {
		cleanup()
		return UpResult{}, err
	}
	removed, err := m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12())
	if err != nil {
		cleanup()
		return UpResult{}, err
	}
	ctr, err := m.Engine.Inspect(ctx, id)
	if err != nil {
		cleanup()
		return UpResult{}, err
	}
	if err := m.writeContainerJSON(plan, dir, ctr); err != nil {
		cleanup()
		return UpResult{}, err
	}
	m.progress("starting %s (%.12s)", plan.Name, id)
	if err := m.Engine.Start(ctx, id); err != nil {
		cleanup()
		return UpResult{}, fmt.Errorf("start %s: %w", plan.Name, err)
	}
	if err := m.waitSockets(ctx, dir); err != nil {
		cleanup()
		return UpResult{}, err
	}
	ctr, err = m.Engine.Inspect(ctx, id)
	if err != nil {
		cleanup()
		return UpResult{}, err
	}
	rec, err := m.record(ctx, plan, dir, ctr)
	if err != nil {
		cleanup()
		return UpResult{}, err
	}
	return UpResult{Record: rec, Action: action, Reason: reason, Removed: removed}, nil
}

const zeroID = "0000000000000000000000000000000000000000000000000000000000000000"

func (m *Manager) writeContainerJSON(plan *Plan, dir sockets.Dir, c engine.Container) error {
	return sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{
		ID:        c.ID,
		Name:      plan.ContainerName,
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
		Schema:      1,
		SocketDir:   dir.Path,
		ThreadKey:   plan.ThreadKey,
		InstanceKey: plan.InstanceKey,
		CardPath:    r.CardPath,
		Workspace:   r.Workspace,
		Labels:      plan.Spec.Labels,
		Devices:     plan.Devices,
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

// waitSockets waits until both servers answer in dir.
func (m *Manager) waitSockets(ctx context.Context, dir sockets.Dir) error {
	timeout := m.SocketTimeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 2 * time.Millisecond
	var last error
	for {
		last = m.probe(ctx, dir)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tmux and nvim did not answer in %s within %s: %v (see `stemctl exec %s -- cat /tmp/stem-init.log`)", dir.Path, timeout, last, filepath.Base(filepath.Dir(dir.Path)))
		case <-time.After(delay):
		}
		if delay < 25*time.Millisecond {
			delay *= 2
		}
	}
}

func (m *Manager) probe(ctx context.Context, dir sockets.Dir) error {
	for _, s := range []string{dir.Tmux(), dir.Nvim()} {
		if _, err := os.Stat(s); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(s), err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if m.TmuxProbe != nil {
		if err := m.TmuxProbe(pctx, dir.Tmux()); err != nil {
			return fmt.Errorf("tmux: %w", err)
		}
	}
	if m.NvimProbe != nil {
		if err := m.NvimProbe(pctx, dir.Nvim()); err != nil {
			return fmt.Errorf("nvim: %w", err)
		}
	}
	return nil
}

// Status is an instance's observed state.
type Status struct {
	Record    registry.Record   `json:"record"`
	State     string            `json:"state"` // running, stopped, missing, unhealthy
	Container *engine.Container `json:"container,omitempty"`
	Tmux      bool              `json:"tmux_answers"`
	Nvim      bool              `json:"nvim_answers"`
	Selected  bool              `json:"selected"`
	Problems  []string          `json:"problems,omitempty"`
}

// Status inspects one instance (by name or container id).
func (m *Manager) Status(ctx context.Context, ref string) (Status, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return Status{}, err
	}
	return m.status(ctx, rec), nil
}

func (m *Manager) status(ctx context.Context, rec registry.Record) Status {
	st := Status{Record: rec}
	if cur, err := selection.Current(m.Layout); err == nil && cur == filepath.Clean(rec.SocketDir) {
		st.Selected = true
	}
	c, err := m.Engine.Inspect(ctx, rec.ContainerID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		st.State = "missing"
		st.Problems = append(st.Problems, fmt.Sprintf("container %.12s no longer exists (removed outside stem): `stemctl up` re-creates it", rec.ContainerID))
		return st
	case err != nil:
		st.State = "unknown"
		st.Problems = append(st.Problems, err.Error())
		return st
	}
	st.Container = &c
	if c.Labels[labels.Instance] != rec.Instance {
		st.State = "unhealthy"
		st.Problems = append(st.Problems, fmt.Sprintf("container %.12s carries instance label %q", c.ID, c.Labels[labels.Instance]))
		return st
	}
	if !c.Running {
		st.State = "stopped"
		return st
	}
	dir := rec.Dir()
	if err := m.Layout.Check(dir); err != nil {
		st.Problems = append(st.Problems, err.Error())
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if m.TmuxProbe != nil {
		if err := m.TmuxProbe(pctx, dir.Tmux()); err != nil {
			st.Problems = append(st.Problems, "tmux: "+err.Error())
		} else {
			st.Tmux = true
		}
	}
	if m.NvimProbe != nil {
		if err := m.NvimProbe(pctx, dir.Nvim()); err != nil {
			st.Problems = append(st.Problems, "nvim: "+err.Error())
		} else {
			st.Nvim = true
		}
	}
	st.State = "running"
	if len(st.Problems) > 0 {
		st.State = "unhealthy"
	}
	return st
}

// List returns the status of every registered instance.
func (m *Manager) List(ctx context.Context) ([]Status, error) {
	recs, err := m.Registry.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(recs))
	for _, rec := range recs {
		out = append(out, m.status(ctx, rec))
	}
	return out, nil
}

// Down stops an instance's container; its record and state stay.
func (m *Manager) Down(ctx context.Context, ref string, timeout time.Duration) (registry.Record, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return rec, err
	}
	if err := m.Engine.Stop(ctx, rec.ContainerID, timeout); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return rec, fmt.Errorf("stop %s: %w", rec.Instance, err)
	}
	return rec, nil
}

// Remove deletes the container, its socket directories, its registry record,
// and the selection if it pointed there. The card repository is untouched.
func (m *Manager) Remove(ctx context.Context, ref string) (registry.Record, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return rec, err
	}
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
		return rec, fmt.Errorf("instance %s: its container %.12s no longer exists: run `stemctl up %s %s %s %s` to re-create it", rec.Instance, rec.ContainerID, rec.Profile, rec.Series, rec.Card, rec.Task)
	}
	if err != nil {
		return rec, err
	}
	if c.Labels[labels.Instance] != rec.Instance {
		return rec, fmt.Errorf("instance %s: container %.12s carries instance label %q", rec.Instance, c.ID, c.Labels[labels.Instance])
	}
	if !c.Running {
		return rec, fmt.Errorf("instance %s is %s: run `stemctl up %s %s %s %s` to start it", rec.Instance, c.State, rec.Profile, rec.Series, rec.Card, rec.Task)
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
