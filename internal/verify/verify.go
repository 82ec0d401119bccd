// Package verify is the one place that decides whether a socket directory
// really belongs to a live instance. Every consumer (stemctl mcp select and
// status, stem-mcp before serving) re-checks the same four things:
//
//  1. a registry record exists and its socket directory is the one derived
//     from its keys and full container id (and passes ownership/mode checks),
//     and nothing but sockets sits at the socket paths;
//  2. container.json in that directory names the same full id and instance;
//  3. the engine reports that exact container, running, with our instance
//     label;
//  4. the tmux server answers on the directory's socket.
//
// Neovim's answer is asked too, and reported (Target.Editor), but does not
// fail verification: the editor can be quit, broken or hostile on its own,
// and only what uses it may fail for that (stem-mcp's tools, say).
//
// A re-created container has a new id and a new directory, so a stale
// directory fails 1-3 even if someone kept it around.
package verify

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
)

// Inspector is the part of the engine verification needs.
type Inspector interface {
	Inspect(ctx context.Context, nameOrID string) (engine.Container, error)
}

// Probe checks that a server answers on a socket.
type Probe func(ctx context.Context, socket string) error

// Servers is the one check of whether an instance's tmux and Neovim
// answer: verification, `stemctl up` (reuse or re-create), `status` and
// `list` all ask it, so they cannot disagree.
type Servers struct {
	Tmux Probe // nil: not probed (the caller connects itself)
	Nvim Probe
	// TmuxInside asks the container's own tmux, for when Tmux fails with
	// probe.ErrTmuxVersion: a server of another protocol version is not a
	// dead one (nil: no fallback).
	TmuxInside func(ctx context.Context, containerID, socket string) error
}

// Health is what Servers.Check found: nil for a server that answers (or
// was not probed).
type Health struct {
	Tmux, Nvim error
}

// probeTimeout bounds each server's answer when ctx allows longer.
const probeTimeout = 2 * time.Second

// Check asks both servers in dir, which belongs to container id.
func (s Servers) Check(ctx context.Context, dir sockets.Dir, containerID string) Health {
	var h Health
	if s.Tmux != nil {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		h.Tmux = s.Tmux(pctx, dir.Tmux())
		if s.TmuxInside != nil && errors.Is(h.Tmux, probe.ErrTmuxVersion) {
			h.Tmux = s.TmuxInside(pctx, containerID, dir.Tmux())
		}
		cancel()
	}
	if s.Nvim != nil {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		h.Nvim = s.Nvim(pctx, dir.Nvim())
		cancel()
	}
	return h
}

// Checker holds what verification needs.
type Checker struct {
	Layout    sockets.Layout
	Registry  *registry.Registry
	Inspector Inspector
	Servers   Servers
}

// Target is a verified instance.
type Target struct {
	Record    registry.Record       `json:"record"`
	Dir       sockets.Dir           `json:"dir"`
	Container engine.Container      `json:"container"`
	Info      sockets.ContainerInfo `json:"info"`
	// Editor is why Neovim did not answer (nil: it answered, or was not
	// probed). It can quote the server: print it as one clean line.
	Editor error `json:"-"`
}

// Error is a failed check; Check names which one.
type Error struct {
	Instance string
	Check    string // registry, socket-dir, container-json, container, label, tmux, selection
	Err      error
}

func (e *Error) Error() string {
	if e.Instance == "" {
		return fmt.Sprintf("%s check failed: %v", e.Check, e.Err)
	}
	return fmt.Sprintf("instance %s: %s check failed: %v", e.Instance, e.Check, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

// Instance verifies the instance named ref (instance name or container id).
func (c *Checker) Instance(ctx context.Context, ref string) (Target, error) {
	rec, err := c.Registry.Find(ctx, ref)
	if err != nil {
		return Target{}, &Error{Check: "registry", Err: err}
	}
	return c.Record(ctx, rec)
}

// Record verifies a registry record.
func (c *Checker) Record(ctx context.Context, rec registry.Record) (Target, error) {
	fail := func(check string, err error) (Target, error) {
		return Target{}, &Error{Instance: rec.Instance, Check: check, Err: err}
	}
	want, err := c.Layout.ForContainer(rec.ThreadKey, rec.InstanceKey, rec.ContainerID)
	if err != nil {
		return fail("registry", err)
	}
	if filepath.Clean(rec.SocketDir) != want.Path {
		return fail("registry", fmt.Errorf("record names socket directory %s, but its keys and container id give %s", rec.SocketDir, want.Path))
	}
	if err := c.Layout.Check(want); err != nil {
		return fail("socket-dir", err)
	}
	// The session is its tmux: a replaced t.sock refuses every call.
	// Neovim's and gdb's sockets are the parts' own: their clients dial
	// through unixpin, which refuses anything but a socket, and only the
	// tools of that part are refused (the terminal goes on working).
	if err := sockets.CheckSocket(want.Tmux()); err != nil {
		return fail("socket-dir", err)
	}
	var info sockets.ContainerInfo
	if err := sockets.ReadJSON(want.Path, sockets.ContainerJSON, &info); err != nil {
		return fail("container-json", err)
	}
	if info.ID != rec.ContainerID || info.Instance != rec.Instance {
		return fail("container-json", fmt.Errorf("container.json names %s (%.12s), the registry %s (%.12s)", info.Instance, info.ID, rec.Instance, rec.ContainerID))
	}
	ctr, err := c.Inspector.Inspect(ctx, rec.ContainerID)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return fail("container", fmt.Errorf("container %.12s no longer exists (removed behind stem's back?): run `stemctl up` to re-create it", rec.ContainerID))
		}
		return fail("container", err)
	}
	if ctr.ID != rec.ContainerID {
		return fail("container", fmt.Errorf("engine returned container %s for id %s", ctr.ID, rec.ContainerID))
	}
	if got := ctr.Labels[labels.Instance]; got != rec.Instance {
		return fail("label", fmt.Errorf("container %.12s has instance label %q, want %q", ctr.ID, got, rec.Instance))
	}
	if !ctr.Running {
		return fail("container", fmt.Errorf("container %.12s is %s, not running: run `stemctl up` to start it", ctr.ID, ctr.State))
	}
	h := c.Servers.Check(ctx, want, ctr.ID)
	if h.Tmux != nil {
		return fail("tmux", h.Tmux)
	}
	return Target{Record: rec, Dir: want, Container: ctr, Info: info, Editor: h.Nvim}, nil
}

// Selected verifies the instance the selection symlink points at. The link
// target must be exactly some record's socket directory; a link swapped to
// any other directory is refused.
func (c *Checker) Selected(ctx context.Context) (Target, error) {
	dir, err := selection.Current(c.Layout)
	if err != nil {
		return Target{}, &Error{Check: "selection", Err: err}
	}
	recs, err := c.Registry.List(ctx)
	if err != nil {
		return Target{}, &Error{Check: "registry", Err: err}
	}
	for _, rec := range recs {
		if filepath.Clean(rec.SocketDir) == dir {
			return c.Record(ctx, rec)
		}
	}
	return Target{}, &Error{Check: "selection", Err: fmt.Errorf("the selection points at %s, which is no registered instance's socket directory (stale or tampered): run `stemctl mcp select INSTANCE`", dir)}
}
