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

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/probe"
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
		fmt.Fprintf(m.Progress, format+"\n", args...)
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
	if rec, err := m.Registry.Get(ctx, plan.Name); err == nil && rec.Workspace != plan.Resolved.Workspace {
		return UpResult{}, fmt.Errorf("instance %s belongs to workspace %s, not %s: remove it first with `stemctl rm %s`", plan.Name, rec.Workspace, plan.Resolved.Workspace, plan.Name)
	}
	// A runtime directory that is not ours (or not private) is the user's
	// to fix; re-creating the container would not help and would end the
	// student's session, so refuse before touching anything.
	if err := m.Layout.CheckExisting(plan.InstanceDir); err != nil {
		return UpResult{}, fmt.Errorf("%w (nothing was changed)", err)
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
		if err := m.waitSockets(ctx, dir, existing.ID); err != nil {
			return UpResult{}, m.withLog(ctx, existing.ID, err)
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
	rec, err := m.Registry.Get(ctx, plan.Name)
	if err != nil || rec.ContainerID != existing.ID || rec.SocketDir != dir.Path {
		rec, err = m.record(ctx, plan, dir, existing)
		if err != nil {
			return UpResult{}, err
		}
	}
	return UpResult{Record: rec, Action: action, Reason: reason}, nil
}

// restartNvim opens a new background window running nvim on the instance's
// socket, the way stem-init's first window does. It runs the container's own
// tmux (through exec) so a host tmux of another version cannot matter.
func (m *Manager) restartNvim(ctx context.Context, plan *Plan, dir sockets.Dir, id string) error {
	m.progress("nvim in %s is not running; starting it in a new tmux window", plan.Name)
	// A dead nvim can leave its socket behind, and nvim will not listen on
	// an existing path. Only a socket is removed, never what replaced it.
	if fi, err := os.Lstat(dir.Nvim()); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(dir.Nvim())
	}
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
	m.progress("re-creating %s: %s", plan.Name, reason)
	if err := m.Engine.Remove(ctx, old.ID, true); err != nil {
		return UpResult{}, fmt.Errorf("remove old container %.12s: %w", old.ID, err)
	}
	return m.create(ctx, plan, Recreated, reason)
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

func (m *Manager) create(ctx context.Context, plan *Plan, action Action, reason string) (UpResult, error) {
	r := plan.Resolved
	if err := plan.checkRecordedDevices(); err != nil {
		return UpResult{}, err
	}
	// The instance directory must exist before create (bind source).
	probeDir, _ := m.Layout.ForContainer(plan.ThreadKey, plan.InstanceKey, zeroID)
	if err := m.Layout.Create(sockets.Dir{Path: filepath.Dir(probeDir.Path)}); err != nil {
		return UpResult{}, err
	}
	if _, err := cardstate.Ensure(r.CardPath, plan.Name); err != nil {
		return UpResult{}, err
	}
	// The MCP selection names a container's directory; when it named this
	// instance's previous container it follows the instance to the new one
	// (verification then holds the new container to the same checks).
	cur, _ := selection.Current(m.Layout)
	follow := strings.HasPrefix(cur, plan.InstanceDir+string(filepath.Separator))
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
	if err := m.waitSockets(ctx, dir, id); err != nil {
		err = m.withLog(ctx, id, err)
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
	if follow {
		if err := selection.Select(m.Layout, dir); err != nil {
			m.progress("warning: the MCP selection still names the old container: %v (run `stemctl mcp select %s`)", err, plan.Name)
		} else {
			m.progress("the MCP selection follows %s to its new container", plan.Name)
		}
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
		Schema:      labels.SchemaNumber(),
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
		if errors.Is(err, probe.ErrTmuxVersion) || errors.Is(err, probe.ErrNoHostTmux) {
			// The host's tmux speaks another protocol version (or there is
			// none): ask the container's own tmux instead, rather than
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
	return st
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
