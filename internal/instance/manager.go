package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
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
	// KeepRunning makes Up refuse to re-create a running container (it
	// ends the student's shells, programs and editor): commands that only
	// use an instance (build, debug, agent start) set it and name the
	// `stemctl up` that would do it.
	KeepRunning bool
	// Force lets Up re-create a running container whose nvim has unsaved
	// buffers (NvimModified); without it Up refuses and lists them.
	Force bool
	// NvimModified lists an nvim's unsaved buffers (nil: not checked).
	NvimModified func(ctx context.Context, socket string) ([]string, error)
	// Workspace is the user's workspace root; List also shows containers
	// stem made for it that no record names. Empty: records only.
	Workspace string
	// MCPBinaryErr says why MCPBinary is empty; Up, which mounts the
	// binary into new containers, reports it.
	MCPBinaryErr error
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
	// Repaired: the container was healthy but nvim was not running; it was
	// started again inside the same tmux session.
	Repaired Action = "repaired"
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
		// Progress lines quote errors, which may carry a container's text.
		fmt.Fprintln(m.Progress, termtext.Line(fmt.Sprintf(format, args...), 0))
	}
}

// Up makes the instance for r exist, run, and answer on both sockets,
// reusing a healthy container whose config hash and schema match.
func (m *Manager) Up(ctx context.Context, r *workspace.Resolved, devices []string) (UpResult, error) {
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
	opt := PlanOptions{Layout: m.Layout, ImageID: img.ID, MCPBinary: m.MCPBinary, Devices: devices}
	if devices == nil {
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
		if _, err := m.Layout.RemoveStale(plan.ThreadKey, plan.InstanceKey, dir.CID12()); err != nil {
			return UpResult{}, err
		}
		// Sockets left by the previous run are dead; remove them so the
		// wait below sees the new servers' sockets.
		for _, s := range []string{sockets.TmuxSocket, sockets.NvimSocket, sockets.GDBSocket} {
			dir.Remove(s)
		}
		if err := m.writeContainerJSON(plan, dir, existing); err != nil {
			return UpResult{}, err
		}
		if err := m.Engine.Start(ctx, existing.ID); err != nil {
			return UpResult{}, fmt.Errorf("start %s: %w", plan.Name, err)
		}
		if err := m.waitSockets(ctx, dir, existing.ID); err != nil {
			return UpResult{}, m.withLog(ctx, existing.ID, err)
		}
		if err := m.gitMounted(ctx, plan, existing.ID); err != nil {
			m.Engine.Stop(context.WithoutCancel(ctx), existing.ID, 0)
			return UpResult{}, fmt.Errorf("%w; stem stopped the container", err)
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
		action, reason = Repaired, "nvim was not running: started it in a new tmux window \"edit\""
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

// restartNvim opens a new background window running nvim on the instance's
// socket, the way stem-init's first window does. It runs the container's own
// tmux (through exec) so a host tmux of another version cannot matter.
func (m *Manager) restartNvim(ctx context.Context, plan *Plan, dir sockets.Dir, id string) error {
	m.progress("nvim in %s is not running; starting it in a new tmux window", plan.Name)
	// A dead nvim can leave its socket behind, and nvim will not listen on
	// an existing path. Only a socket is removed, never what replaced it,
	// and never through a <cid12> swapped for a symlink.
	dir.RemoveSocket(sockets.NvimSocket)
	var out strings.Builder
	code, err := m.Engine.Exec(ctx, id, engine.ExecSpec{
		Cmd: []string{"tmux", "-S", dir.Tmux(), "new-window", "-d", "-n", "edit", "-c", plan.Resolved.TaskDir,
			`set -m; nvim --listen "$STEM_SOCKDIR/n.sock"; exec bash -l`},
		Stdout: &out, Stderr: &out,
	})
	if err == nil && code != 0 {
		err = fmt.Errorf("tmux new-window exited with %d: %s", code, strings.TrimSpace(out.String()))
	}
	if err == nil {
		err = m.waitSockets(ctx, dir, id)
	}
	if err != nil {
		return fmt.Errorf("nvim in %s is not running and starting it again failed: %w; to start the whole session over (this ends the student's shells), run `stemctl rm %s` and `stemctl up` again", plan.Name, err, plan.Name)
	}
	return nil
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
		// The servers of its previous run are gone; their sockets are dead.
		for _, s := range []string{sockets.TmuxSocket, sockets.NvimSocket, sockets.GDBSocket} {
			oldDir.Remove(s)
		}
		err = m.Engine.Start(ctx, old.ID)
	}
	if err == nil {
		err = m.waitSockets(ctx, oldDir, old.ID)
	}
	if err == nil {
		if err = m.gitMounted(ctx, plan, old.ID); err != nil {
			m.Engine.Stop(ctx, old.ID, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("re-creating %s failed, and starting its old container %.12s again failed too (%v); the registry still names it: `%s` tries again once the cause is fixed: %w", plan.Name, old.ID, err, UpCommand(m.recordOf(plan)), cause)
	}
	return fmt.Errorf("re-creating %s failed, so its old container %.12s was kept and started again (its shells and programs were restarted; the registry, the selection and the card still name it): %w", plan.Name, old.ID, cause)
}

// recordOf is the part of a record UpCommand needs.
func (m *Manager) recordOf(plan *Plan) registry.Record {
	r := plan.Resolved
	return registry.Record{Profile: r.Profile.Name, Series: r.Series, Card: r.Card, Task: r.TaskID, Target: r.Target.Name}
}

// launch creates a container for plan named name, makes its socket
// directory and container.json, runs beforeStart, starts it and waits until
// both servers answer. On any failure it removes the container and its
// socket directory again; the caller undoes the rest.
func (m *Manager) launch(ctx context.Context, plan *Plan, name string, beforeStart func(sockets.Dir) error) (engine.Container, sockets.Dir, error) {
	spec := plan.Spec
	spec.Name = name
	undoGit, err := prepareGit(plan)
	if err != nil {
		return engine.Container{}, sockets.Dir{}, err
	}
	m.progress("creating %s from %s", plan.Name, plan.Resolved.Profile.Image)
	id, err := m.Engine.Create(ctx, spec)
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
	dir, err := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, id)
	if err != nil {
		return fail(err)
	}
	made, err = m.Layout.CreateLevels(dir)
	if err != nil {
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

// mayEndSession decides whether a running container may be re-created:
// that ends the student's shells and programs and loses nvim's unsaved
// buffers, so it never happens as a side effect of a command that only
// uses the instance, nor over unsaved work without --force.
func (m *Manager) mayEndSession(ctx context.Context, plan *Plan, old engine.Container, reason string) error {
	up := UpCommand(registry.Record{Profile: plan.Resolved.Profile.Name, Series: plan.Resolved.Series, Card: plan.Resolved.Card, Task: plan.Resolved.TaskID, Target: plan.Resolved.Target.Name})
	if m.KeepRunning {
		return fmt.Errorf("%s must be re-created (%s), which ends the student's session (shells, running programs, unsaved editor buffers); nothing was changed: run `%s` to re-create it", plan.Name, reason, up)
	}
	if m.Force || m.NvimModified == nil {
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
	delay := 2 * time.Millisecond
	var last error
	for {
		last = m.probe(ctx, dir, id)
		if last == nil {
			return nil
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

// TmuxInside returns a probe that asks container id's own tmux (through
// exec) whether the server on sock has a session: for when the host's tmux
// speaks another protocol version or there is none (verify.Checker).
func TmuxInside(e engine.Engine) func(ctx context.Context, id, sock string) error {
	return func(ctx context.Context, id, sock string) error {
		return tmuxInside(ctx, e, id, sock)
	}
}

// tmuxInside asks container id's tmux whether the server on sock has a
// session.
func tmuxInside(ctx context.Context, e engine.Engine, id, sock string) error {
	var out strings.Builder
	code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"tmux", "-S", sock, "list-sessions", "-F", "#{session_name}"}, Stdout: &out, Stderr: &out})
	if err != nil {
		return fmt.Errorf("tmux in the container: %w", err)
	}
	if code != 0 || strings.TrimSpace(out.String()) == "" {
		return fmt.Errorf("tmux server on %s does not answer (asked inside the container): %s", sock, strings.TrimSpace(out.String()))
	}
	return nil
}

// serverDown says which server did not answer, and why.
type serverDown struct {
	server string // tmux or nvim
	err    error
}

func (e *serverDown) Error() string { return e.server + ": " + e.err.Error() }
func (e *serverDown) Unwrap() error { return e.err }

// gone says the server is not there at all (no socket, or nobody listening),
// as opposed to there but slow to answer.
func (e *serverDown) gone() bool {
	return errors.Is(e.err, os.ErrNotExist) || errors.Is(e.err, syscall.ECONNREFUSED)
}

// probe checks both servers in container id's directory.
func (m *Manager) probe(ctx context.Context, dir sockets.Dir, id string) error {
	if err := dir.CheckSockets(); err != nil {
		return err
	}
	for _, s := range []struct {
		name, path string
		probe      verify.Probe
	}{{"tmux", dir.Tmux(), m.TmuxProbe}, {"nvim", dir.Nvim(), m.NvimProbe}} {
		if _, err := os.Stat(s.path); err != nil {
			return &serverDown{s.name, err}
		}
		if s.probe == nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.probe(pctx, s.path)
		if errors.Is(err, probe.ErrTmuxVersion) {
			// The server speaks another tmux protocol version than
			// stem's client: ask the container's own tmux instead, rather than
			// taking a healthy session for a dead one.
			err = tmuxInside(pctx, m.Engine, id, s.path)
		}
		cancel()
		if err != nil {
			return &serverDown{s.name, err}
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
	Hint      string            `json:"hint,omitempty"` // what to run about it
	// Stale lists predecessors' socket directories beside the current one
	// (the next `stemctl up` removes them).
	Stale []string `json:"stale_socket_dirs,omitempty"`
	// CardState is what the card repository says about the instance.
	CardState *CardState `json:"card_state,omitempty"`
	// Git lists what makes git on the host unsafe in the card (also in
	// Problems, with what to do).
	Git []cardgit.Problem `json:"git_problems,omitempty"`
}

// CardState is the card-side copy of an instance's record
// (<card>/.stem/instances/<instance>/instance.json, or the older .rv/
// layout). It is informational, for whoever looks at the card: the card is
// writable from inside the container, so stem never acts on it; the
// registry is what counts.
type CardState struct {
	Dir         string `json:"dir,omitempty"`
	Legacy      bool   `json:"legacy,omitempty"` // read from .rv/
	ContainerID string `json:"container_id,omitempty"`
	// Current: it names the container the registry names.
	Current bool   `json:"current"`
	Error   string `json:"error,omitempty"`
}

// cardState reads rec's card-side state (cardstate.Read: .stem/, then .rv/).
func cardState(rec registry.Record) *CardState {
	if rec.CardPath == "" || rec.Instance == "" {
		return nil
	}
	var have registry.Record
	dir, err := cardstate.Read(rec.CardPath, rec.Instance, &have)
	if err != nil {
		return &CardState{Error: err.Error()}
	}
	cs := &CardState{Dir: dir, Legacy: dir != cardstate.Dir(rec.CardPath, rec.Instance)}
	if len(have.ContainerID) == 64 && strings.Trim(have.ContainerID, "0123456789abcdef") == "" {
		cs.ContainerID = have.ContainerID
	}
	cs.Current = cs.ContainerID != "" && cs.ContainerID == rec.ContainerID
	return cs
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
	st := m.containerStatus(ctx, rec)
	gitStatus(ctx, &st)
	return st
}

func (m *Manager) containerStatus(ctx context.Context, rec registry.Record) Status {
	st := Status{Record: rec, CardState: cardState(rec)}
	if rec.ThreadKey != "" && rec.SocketDir != "" {
		if stale, err := m.Layout.Siblings(rec.ThreadKey, rec.InstanceKey, filepath.Base(rec.SocketDir)); err == nil {
			st.Stale = stale
		}
	}
	if cur, err := selection.Current(m.Layout); err == nil && cur == filepath.Clean(rec.SocketDir) {
		st.Selected = true
	}
	c, err := m.Engine.Inspect(ctx, rec.ContainerID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		st.State = "missing"
		st.Problems = append(st.Problems, fmt.Sprintf("container %.12s no longer exists (removed outside stem): `%s` re-creates it", rec.ContainerID, UpCommand(rec)))
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
		st.Hint = fmt.Sprintf("`%s` starts it again", UpCommand(rec))
		return st
	}
	dir := rec.Dir()
	if err := m.Layout.Check(dir); err != nil {
		st.Problems = append(st.Problems, err.Error())
	}
	if err := dir.CheckSockets(); err != nil {
		st.Problems = append(st.Problems, err.Error()+"; stem will not use it: `stemctl rm "+rec.Instance+"` and `"+UpCommand(rec)+"` start over")
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
		st.Hint = fmt.Sprintf("`%s` repairs it (starts nvim again in the same session if only nvim is gone, else re-creates the container)", UpCommand(rec))
	}
	st.clean()
	return st
}

// maxProblem bounds one problem line of a Status.
const maxProblem = 1000

// clean makes the text of st that may come from the container (servers'
// errors, the card's state) one sanitized line each, for the terminal and
// for JSON alike.
func (st *Status) clean() {
	for i, p := range st.Problems {
		st.Problems[i] = termtext.Line(p, maxProblem)
	}
	if st.CardState != nil {
		st.CardState.Error = termtext.Line(st.CardState.Error, maxProblem)
	}
}

// UpCommand is the stemctl command line that brings rec's instance up again
// (devices are kept from the record).
func UpCommand(rec registry.Record) string {
	c := fmt.Sprintf("stemctl up %s %s %s %s", rec.Profile, rec.Series, rec.Card, rec.Task)
	if rec.Target != "" {
		c += " --target " + rec.Target
	}
	return c
}

// List returns the status of every registered instance.
func (m *Manager) List(ctx context.Context) ([]Status, error) {
	recs, err := m.Registry.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(recs))
	known := map[string]bool{}
	for _, rec := range recs {
		out = append(out, m.status(ctx, rec))
		known[rec.ContainerID] = true
	}
	// Containers stem made that no record names (a registry lost or
	// edited, a crash between create and record): list them so they do not
	// linger unseen, holding memory and a card mount.
	if m.Workspace == "" {
		return out, nil
	}
	ctrs, err := m.Engine.List(ctx, map[string]string{labels.Managed: "true", labels.Workspace: m.Workspace})
	if err != nil {
		return out, fmt.Errorf("list stem's containers: %w", err)
	}
	for _, c := range ctrs {
		if known[c.ID] {
			continue
		}
		l := c.Labels
		c := c
		out = append(out, Status{
			Record: registry.Record{Instance: l[labels.Instance], Profile: l[labels.Profile], Series: l[labels.Series], Card: l[labels.Card],
				Task: l[labels.Task], Target: l[labels.Target], ContainerID: c.ID, Workspace: l[labels.Workspace], Labels: l},
			State:     "orphan",
			Container: &c,
			Problems:  []string{fmt.Sprintf("container %s (%s) carries stem's labels but no registry record names it", c.Name, c.State)},
			Hint:      fmt.Sprintf("`podman rm -f %.12s` removes it; `%s` makes a new instance", c.ID, UpCommand(registry.Record{Profile: l[labels.Profile], Series: l[labels.Series], Card: l[labels.Card], Task: l[labels.Task], Target: l[labels.Target]})),
		})
	}
	return out, nil
}

// Down stops an instance's container; its record and state stay.
func (m *Manager) Down(ctx context.Context, ref string, timeout time.Duration) (registry.Record, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return rec, err
	}
	unlock, err := m.Registry.LockInstance(ctx, rec.Instance)
	if err != nil {
		return rec, err
	}
	defer unlock()
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
	unlock, err := m.Registry.LockInstance(ctx, rec.Instance)
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
