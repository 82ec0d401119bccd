package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

// Manager owns instance lifecycles.
type Manager struct {
	Engine    engine.Engine
	Registry  *registry.Registry
	Layout    sockets.Layout
	MCPBinary string
	// NvimModified lists an nvim's unsaved buffers (nil: not checked).
	NvimModified func(ctx context.Context, socket string) ([]string, error)
	// NvimQuit ends an nvim without saving (nil: not done).
	NvimQuit func(ctx context.Context, socket string)
	// Workspace is the user's workspace root; List also shows containers
	// stem made for it that no record names. Empty: records only.
	Workspace string
	// MCPBinaryErr says why MCPBinary is empty; Up, which mounts the
	// binary into new containers, reports it.
	MCPBinaryErr error
	// Servers checks that tmux and nvim answer (the same check as
	// verification's).
	Servers verify.Servers
	// Progress receives one line per step of long work (may be io.Discard).
	Progress io.Writer
	// SocketTimeout bounds the wait for both servers after a start.
	SocketTimeout time.Duration
	// IDMap says which host ids new containers get (internal/idmap);
	// nil keeps the engine's default user namespace (tests of other
	// parts).
	IDMap func() (idmap.Map, error)
	// DigestCache is the file that caches stem-mcp's digest (empty: the
	// user's DefaultDigestCache()).
	DigestCache string
}

// Action says what Up did.
type Action string

const (
	Reused    Action = "reused"
	Created   Action = "created"
	Recreated Action = "recreated"
	Started   Action = "started"
	// Repaired: the container was healthy but nvim was not running; it was
	// started again inside the same tmux session.
	Repaired Action = "repaired"
)

// UpOptions say what one Up may do.
type UpOptions struct {
	// Devices are host devices for the container (--device); nil keeps
	// the ones the instance was brought up with.
	Devices []string
	// KeepRunning refuses to re-create a running container (it ends the
	// student's shells, programs and editor): commands that only use an
	// instance (build, debug, agent start) set it, and the error names the
	// `stemctl up` that would do it.
	KeepRunning bool
	// Force re-creates a running container whose nvim has unsaved buffers
	// (Manager.NvimModified); without it Up refuses and lists them.
	Force bool
}

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
		// Progress lines quote errors, which may carry a container's text.
		fmt.Fprintln(m.Progress, termtext.Line(fmt.Sprintf(format, args...), 0))
	}
}

// Up makes the instance for r exist, run, and answer on both sockets,
// reusing a healthy container whose config hash and schema match.
func (m *Manager) Up(ctx context.Context, r *workspace.Resolved, o UpOptions) (UpResult, error) {
	start := time.Now()
	if m.MCPBinary == "" {
		if m.MCPBinaryErr != nil {
			return UpResult{}, m.MCPBinaryErr
		}
		return UpResult{}, errors.New("no stem-mcp binary to mount into the instance")
	}
	img, err := m.Engine.ImageInspect(ctx, r.Profile.Image)
	if err != nil {
		return UpResult{}, fmt.Errorf("image for profile %s: %w", r.Profile.Name, err)
	}
	opt := PlanOptions{Layout: m.Layout, ImageID: img.ID, MCPBinary: m.MCPBinary, Devices: o.Devices, DigestCache: m.DigestCache}
	if m.IDMap != nil {
		idm, err := m.IDMap()
		if err != nil {
			return UpResult{}, err
		}
		opt.IDMap = &idm
	}
	if o.Devices == nil {
		// Without --device, keep the devices the instance was brought up
		// with: `stemctl build ...` must not re-create an rp2350 instance
		// without its board.
		if rec, err := m.Registry.Get(ctx, Name(r)); err == nil && rec.Workspace == r.Workspace && len(rec.Devices) > 0 {
			opt.Devices, opt.RecordedDevices = rec.Devices, true
		}
	}
	plan, err := NewPlan(r, opt)
	if err != nil {
		return UpResult{}, err
	}
	plan.up = o
	unlock, err := m.Registry.LockInstance(ctx, plan.Name)
	if err != nil {
		return UpResult{}, err
	}
	defer unlock()
	res, err := m.up(ctx, plan)
	res.Duration = time.Since(start)
	return res, err
}

func (m *Manager) up(ctx context.Context, plan *Plan) (UpResult, error) {
	// Instance names are per account: the same task in another workspace
	// would take over this record.
	rec, recErr := m.Registry.Get(ctx, plan.Name)
	if recErr == nil && rec.Workspace != plan.Resolved.Workspace {
		return UpResult{}, fmt.Errorf("instance %s belongs to workspace %s, not %s: remove it first with `stemctl rm %s`", plan.Name, rec.Workspace, plan.Resolved.Workspace, plan.Name)
	}
	// A runtime directory that is not ours (or not private) is the user's
	// to fix; re-creating the container would not help and would end the
	// student's session, so refuse before touching anything.
	if err := m.Layout.CheckExisting(plan.InstanceDir); err != nil {
		return UpResult{}, fmt.Errorf("%w (nothing was changed)", err)
	}
	var known *registry.Record
	if recErr == nil {
		known = &rec
	}
	if err := m.checkGit(ctx, plan, known); err != nil {
		return UpResult{}, err
	}
	existing, err := m.findContainer(ctx, plan, known)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		action := Created
		reason := ""
		if known != nil {
			action, reason = Recreated, "its container was removed outside stem"
		}
		return m.create(ctx, plan, action, reason)
	case err != nil:
		return UpResult{}, err
	}
	if !m.ours(plan, existing) {
		return UpResult{}, fmt.Errorf("a container named %s exists but stem did not create it for this workspace; remove or rename it (podman rm %s)", existing.Name, existing.Name)
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
		if err := m.grantSockets(plan, dir); err != nil {
			return UpResult{}, err
		}
		if err := m.grantCard(plan); err != nil {
			return UpResult{}, err
		}
		if _, err := m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12()); err != nil {
			return UpResult{}, err
		}
		if err := m.writeContainerJSON(plan, dir, existing); err != nil {
			return UpResult{}, err
		}
		if err := m.startStopped(ctx, plan, dir, existing.ID); err != nil {
			return UpResult{}, err
		}
		rec, err := m.record(ctx, plan, dir, existing)
		return UpResult{Record: rec, Action: Started}, err
	}
	if err := m.Layout.Check(dir); err != nil {
		return m.recreate(ctx, plan, existing, "its socket directory is unusable: "+err.Error())
	}
	if err := dir.CheckSockets(); err != nil {
		// Planted from inside: re-creating would end the student's session
		// on the say-so of whatever ran in it, so stop and say what to do.
		return UpResult{}, fmt.Errorf("instance %s: %w; stem will not use it: inspect it with `stemctl attach %s`, or start over with `stemctl rm %s` and `stemctl up`", plan.Name, err, plan.Name, plan.Name)
	}
	if err := m.grantCard(plan); err != nil {
		return UpResult{}, err
	}
	action, reason := Reused, ""
	if err := m.probe(ctx, dir, existing.ID); err != nil {
		var down *serverDown
		if !errors.As(err, &down) || down.server != "nvim" || !down.gone() {
			return m.recreate(ctx, plan, existing, "its servers do not answer: "+err.Error())
		}
		// tmux answers, so the student's session (shells, running
		// programs, scrollback) is alive: start only the editor again.
		if err := m.restartNvim(ctx, plan, dir, existing.ID); err != nil {
			return UpResult{}, err
		}
		action, reason = Repaired, "nvim was not running: started it again in the edit window"
	}
	// A predecessor's directory left beside this one (a crash, a container
	// removed behind stem's back) is dead: the container must only see its
	// own. Only directories named like a container id prefix go.
	removed, err := m.Layout.RemoveSiblings(plan.ThreadKey, plan.InstanceKey, dir.CID12())
	for _, p := range removed {
		m.progress("removed the stale socket directory %s", p)
	}
	if err != nil {
		m.progress("warning: %v", err)
	}
	if recErr != nil || rec.ContainerID != existing.ID || rec.SocketDir != dir.Path {
		rec, err = m.record(ctx, plan, dir, existing)
		if err != nil {
			return UpResult{}, err
		}
	} else {
		m.refreshCardState(plan, rec)
	}
	return UpResult{Record: rec, Action: action, Reason: reason, Removed: removed}, nil
}

// ours reports whether c is a container stem made for plan's instance in
// plan's workspace.
func (m *Manager) ours(plan *Plan, c engine.Container) bool {
	return c.Labels[labels.Managed] == "true" && c.Labels[labels.Workspace] == plan.Resolved.Workspace && c.Labels[labels.Instance] == plan.Name
}

// findContainer returns plan's container: the one the record names when it
// is still there and ours, else the one holding the instance's container
// name, else the second name a re-creation uses (an engine that cannot
// rename leaves the new container with it).
func (m *Manager) findContainer(ctx context.Context, plan *Plan, rec *registry.Record) (engine.Container, error) {
	if rec != nil && rec.ContainerID != "" {
		c, err := m.Engine.Inspect(ctx, rec.ContainerID)
		if err == nil && m.ours(plan, c) {
			return c, nil
		}
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return c, err
		}
	}
	c, err := m.Engine.Inspect(ctx, plan.ContainerName)
	if !errors.Is(err, engine.ErrNotFound) {
		return c, err
	}
	if c2, err2 := m.Engine.Inspect(ctx, plan.ContainerName+nextSuffix); err2 == nil && m.ours(plan, c2) {
		return c2, nil
	}
	return c, err
}

// refreshCardState rewrites the card-side copy of rec when it is missing or
// names another container (the student deleted .stem/, or a card carries
// only the older .rv/ layout). It is informational: failures are reported,
// never fatal.
func (m *Manager) refreshCardState(plan *Plan, rec registry.Record) {
	var have registry.Record
	if dir, err := cardstate.Read(plan.Resolved.CardPath, plan.Name, &have); err == nil && dir == cardstate.Dir(plan.Resolved.CardPath, plan.Name) && have.ContainerID == rec.ContainerID {
		return
	}
	if err := cardstate.Write(plan.Resolved.CardPath, plan.Name, rec); err != nil {
		m.progress("warning: %v", err)
	}
}
