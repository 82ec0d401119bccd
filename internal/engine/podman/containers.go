//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/bindings/images"
	"github.com/containers/podman/v5/pkg/domain/entities/types"
	"github.com/containers/podman/v5/pkg/errorhandling"
	"github.com/containers/podman/v5/pkg/specgen"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"go.podman.io/storage/pkg/idtools"
	storagetypes "go.podman.io/storage/types"

	"github.com/stem-edu/stem/internal/engine"
)

// cpuPeriod is the CFS period podman uses for --cpus (100 ms).
const cpuPeriod = 100000

// apiCode returns the HTTP status of an API error, or 0.
func apiCode(err error) int {
	var p *errorhandling.ErrorModel
	if errors.As(err, &p) {
		return p.ResponseCode
	}
	var v errorhandling.ErrorModel
	if errors.As(err, &v) {
		return v.ResponseCode
	}
	return 0
}

// notFound wraps err with engine.ErrNotFound when the service said 404.
func notFound(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	// A container removed while the service looks it up (by name, then in
	// its database) comes back as a 500 that says so.
	if apiCode(err) == http.StatusNotFound || strings.Contains(err.Error(), "no such container") {
		return fmt.Errorf("%s: %w (%w)", msg, engine.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// ImageInspect returns a local image. A missing image is ErrNotFound with a
// hint to build the images.
func (e *Engine) ImageInspect(ctx context.Context, ref string) (v engine.Image, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	r, err := images.GetImage(ctx, ref, nil)
	if e.restarted(ctx, err) {
		r, err = images.GetImage(ctx, ref, nil)
	}
	if err != nil {
		return engine.Image{}, notFound(err, "image %s", ref)
	}
	if r == nil || r.ImageData == nil {
		return engine.Image{}, fmt.Errorf("image %s: empty answer from the service", ref)
	}
	img := engine.Image{ID: r.ID, Names: r.RepoTags, Labels: r.Labels}
	if r.Created != nil {
		img.Created = *r.Created
	}
	return img, nil
}

// specGenerator translates an engine.Spec. Mounts keep the same absolute
// path inside; the hostname stays podman's default (the 12-character id
// prefix), which stem-init uses to find its socket directory.
func specGenerator(spec engine.Spec) (*specgen.SpecGenerator, error) {
	if spec.Image == "" {
		return nil, errors.New("no image given")
	}
	s := specgen.NewSpecGenerator(spec.Image, false)
	s.Name = spec.Name
	s.Command = spec.Command
	s.Env = spec.Env
	s.Labels = spec.Labels
	s.WorkDir = spec.WorkDir
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Dest) {
			return nil, fmt.Errorf("bind mount %s:%s: both paths must be absolute", m.Source, m.Dest)
		}
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		s.Mounts = append(s.Mounts, rspec.Mount{
			Type: "bind", Source: m.Source, Destination: m.Dest, Options: []string{"rbind", opt},
		})
	}
	for _, d := range spec.Devices {
		// The service parses "host[:container[:perms]]" as --device does.
		s.Devices = append(s.Devices, rspec.LinuxDevice{Path: d})
	}
	if spec.MemoryMiB > 0 || spec.Pids > 0 || spec.CPUs > 0 {
		r := &rspec.LinuxResources{}
		if spec.MemoryMiB > 0 {
			limit := spec.MemoryMiB << 20
			r.Memory = &rspec.LinuxMemory{Limit: &limit}
		}
		if spec.Pids > 0 {
			r.Pids = &rspec.LinuxPids{Limit: spec.Pids}
		}
		if spec.CPUs > 0 {
			period := uint64(cpuPeriod)
			quota := int64(math.Round(spec.CPUs * cpuPeriod))
			r.CPU = &rspec.LinuxCPU{Period: &period, Quota: &quota}
		}
		s.ResourceLimits = r
	}
	switch spec.Network {
	case "":
	case "none":
		s.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	default:
		return nil, fmt.Errorf("network mode %q is not supported: use \"none\" or the engine default", spec.Network)
	}
	if spec.Init {
		init := true
		s.Init = &init
	}
	if err := harden(s, spec); err != nil {
		return nil, err
	}
	// As toolbox does: no SELinux separation, so the card and the socket
	// directory are usable without relabelling the student's files.
	s.SelinuxOpts = []string{"disable"}
	return s, nil
}

// harden translates the Spec's hardening fields; the zero values leave
// the engine's defaults.
func harden(s *specgen.SpecGenerator, spec engine.Spec) error {
	s.User = spec.User
	if m := spec.IDMap; m != nil {
		if m.Size == 0 {
			return fmt.Errorf("an id map needs a size")
		}
		ids := []idtools.IDMap{{ContainerID: 0, HostID: int(m.Base), Size: int(m.Size)}}
		s.IDMappings = &storagetypes.IDMappingOptions{UIDMap: ids, GIDMap: ids}
		s.UserNS = specgen.Namespace{NSMode: specgen.Private}
		// Podman (4.3) mounts the IPC namespace's /dev/shm on the host
		// (it takes "private" for "shareable"), and for a container with
		// its own user namespace conmon keeps a copy of that mount in a
		// namespace of its own: removing the container then fails
		// (unlinkat .../userdata/shm: busy) while that conmon winds down.
		// No IPC mount, and a /dev/shm of the container's own instead.
		s.IpcNS = specgen.Namespace{NSMode: specgen.None}
		s.Mounts = append(s.Mounts, rspec.Mount{Type: "tmpfs", Source: "shm", Destination: "/dev/shm",
			Options: []string{"rw", "nosuid", "nodev", "noexec", "mode=1777", "size=65536k"}})
	}
	if spec.DropAllCaps {
		s.CapDrop = []string{"all"}
	}
	if spec.NoNewPrivileges {
		t := true
		s.NoNewPrivileges = &t
	}
	if spec.ReadOnlyRoot {
		t, f := true, false
		s.ReadOnlyFilesystem = &t
		// Only the scratch space the Spec names: not podman's automatic
		// tmpfs on /run and /var/tmp.
		s.ReadWriteTmpfs = &f
	}
	for _, m := range spec.Tmpfs {
		if !filepath.IsAbs(m.Dest) || m.SizeMiB <= 0 {
			return fmt.Errorf("tmpfs %q: the path must be absolute and the size positive", m.Dest)
		}
		opts := []string{"rw", "nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(m.SizeMiB, 10) + "m"}
		if !m.Exec {
			opts = append(opts, "noexec")
		}
		s.Mounts = append(s.Mounts, rspec.Mount{Type: "tmpfs", Source: "tmpfs", Destination: m.Dest, Options: opts})
	}
	return nil
}

// Create creates (does not start) a container and returns its full id.
func (e *Engine) Create(ctx context.Context, spec engine.Spec) (v string, err error) {
	defer e.explain(ctx, &err)
	s, err := specGenerator(spec)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	if spec.NoNewNamespaces {
		// The service reads the profile from a path on its host.
		if _, ok := unixPath(e.uri); !ok {
			return "", fmt.Errorf("create container %s: a seccomp profile needs a local Podman service, not %s", spec.Name, e.uri)
		}
		path, err := writeProfile()
		if err != nil {
			return "", fmt.Errorf("create container %s: %w", spec.Name, err)
		}
		defer os.Remove(path)
		s.SeccompProfilePath = path
	}
	return e.create(ctx, s)
}

func (e *Engine) create(ctx context.Context, s *specgen.SpecGenerator) (string, error) {
	ctx, cancel := e.call(ctx)
	defer cancel()
	r, err := containers.CreateWithSpec(ctx, s, nil)
	if e.restarted(ctx, err) {
		if derr := e.dropPartial(ctx, s); derr != nil {
			return "", fmt.Errorf("create container %s from %s: the Podman service stopped during the create and was started again: %w", s.Name, s.Image, derr)
		}
		r, err = containers.CreateWithSpec(ctx, s, nil)
	}
	if err != nil {
		return "", fmt.Errorf("create container %s from %s: %w", s.Name, s.Image, err)
	}
	return r.ID, nil
}

// Start starts a created or stopped container. An OCI runtime failure
// whose fix is in containers.conf also says which CONTAINERS_CONF the
// service runs with (serviceNote).
func (e *Engine) Start(ctx context.Context, id string) (err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	err = containers.Start(ctx, id, nil)
	if e.restarted(ctx, err) {
		// Starting a running container is not an error.
		err = containers.Start(ctx, id, nil)
	}
	if err != nil && strings.Contains(err.Error(), "container with given ID already exists") {
		// runc's state of a start the service was killed in: Podman
		// cannot start the container again, only remove it.
		return fmt.Errorf("start container %.12s: %w: %w", id, engine.ErrHalfStarted, err)
	}
	if err != nil {
		err = notFound(err, "start container %s", id)
		if serviceGone(err) {
			return err // explain says what became of the service
		}
		return e.withServiceNote(ExplainError(err))
	}
	return nil
}

// Rename gives a container a new name (Podman 4.3's service renames
// running containers too; the hostname, the id prefix, stays).
func (e *Engine) Rename(ctx context.Context, id, name string) (err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	if err := containers.Rename(ctx, id, new(containers.RenameOptions).WithName(name)); err != nil {
		return notFound(err, "rename container %.12s to %s", id, name)
	}
	return nil
}

// Inspect returns a container by name or id.
func (e *Engine) Inspect(ctx context.Context, nameOrID string) (v engine.Container, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	d, err := containers.Inspect(ctx, nameOrID, nil)
	if e.restarted(ctx, err) {
		d, err = containers.Inspect(ctx, nameOrID, nil)
	}
	if err != nil {
		return engine.Container{}, notFound(err, "inspect container %s", nameOrID)
	}
	c := engine.Container{
		ID:      d.ID,
		Name:    d.Name,
		Image:   d.ImageName,
		ImageID: d.Image,
		Created: d.Created,
	}
	if d.Config != nil {
		c.Labels = d.Config.Labels
	}
	if d.State != nil {
		c.State = d.State.Status
		c.Running = d.State.Running
		c.Pid = d.State.Pid
		c.ExitCode = int(d.State.ExitCode)
	}
	return c, nil
}

// List returns the containers, in any state, that carry every given label.
func (e *Engine) List(ctx context.Context, labels map[string]string) (v []engine.Container, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	opts := new(containers.ListOptions).WithAll(true)
	if len(labels) > 0 {
		f := make([]string, 0, len(labels))
		for k, v := range labels {
			f = append(f, k+"="+v)
		}
		opts.WithFilters(map[string][]string{"label": f})
	}
	list, err := containers.List(ctx, opts)
	if e.restarted(ctx, err) {
		list, err = containers.List(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]engine.Container, 0, len(list))
	for _, lc := range list {
		// The filter is the service's; all labels are checked again here
		// so an older service's OR semantics can never widen the result.
		if !hasLabels(lc.Labels, labels) {
			continue
		}
		out = append(out, fromList(lc))
	}
	return out, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func fromList(lc types.ListContainer) engine.Container {
	c := engine.Container{
		ID:       lc.ID,
		Image:    lc.Image,
		ImageID:  lc.ImageID,
		Labels:   lc.Labels,
		State:    lc.State,
		Running:  lc.State == "running",
		Pid:      lc.Pid,
		Created:  lc.Created,
		ExitCode: int(lc.ExitCode),
	}
	if len(lc.Names) > 0 {
		c.Name = lc.Names[0]
	}
	return c
}

// Stop stops a container, killing it after timeout. Stopping a stopped
// container is not an error.
func (e *Engine) Stop(ctx context.Context, id string, timeout time.Duration) (err error) {
	defer e.explain(ctx, &err)
	secs := uint(math.Ceil(timeout.Seconds()))
	if _, ok := ctx.Deadline(); !ok {
		// The service waits up to timeout before it kills: allow for it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.callTimeout+time.Duration(secs)*time.Second)
		defer cancel()
	}
	ctx, cancel := e.call(ctx)
	defer cancel()
	err = containers.Stop(ctx, id, new(containers.StopOptions).WithTimeout(secs))
	if e.restarted(ctx, err) {
		err = containers.Stop(ctx, id, new(containers.StopOptions).WithTimeout(secs))
	}
	if err != nil {
		return notFound(err, "stop container %s", id)
	}
	return nil
}

// Remove removes a container. With force a running container is killed
// first and a missing container is not an error.
func (e *Engine) Remove(ctx context.Context, id string, force bool) (err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	if force {
		// Podman 4.3's forced remove of a container left "stopping" (its
		// Stop's service killed mid-call) deletes the record and leaves the
		// processes running, where nothing can see or end them. Such a
		// container had its SIGTERM already: a SIGKILL first ends it. Any
		// other keeps Podman's own stop (SIGTERM, then the timeout).
		if c, err := containers.Inspect(ctx, id, nil); err == nil && c.State != nil && c.State.Status == "stopping" {
			containers.Kill(ctx, id, new(containers.KillOptions).WithSignal("KILL"))
		}
	}
	reports, err := containers.Remove(ctx, id, new(containers.RemoveOptions).WithForce(force))
	if force && e.restarted(ctx, err) {
		// Forced, a container already removed is not an error.
		reports, err = containers.Remove(ctx, id, new(containers.RemoveOptions).WithForce(force))
	}
	if err == nil {
		for _, r := range reports {
			if r != nil && r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		err = notFound(err, "remove container %s", id)
		if force && errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// MemoryBytes is the container's current memory use as its cgroup counts it.
func (e *Engine) MemoryBytes(ctx context.Context, id string) (v uint64, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	ch, err := containers.Stats(ctx, []string{id}, new(containers.StatsOptions).WithStream(false))
	if e.restarted(ctx, err) {
		ch, err = containers.Stats(ctx, []string{id}, new(containers.StatsOptions).WithStream(false))
	}
	if err != nil {
		return 0, notFound(err, "memory of container %s", id)
	}
	var (
		mem   uint64
		found bool
		rerr  error
	)
	// Drain the channel: the bindings' reader goroutine blocks until it is read.
	for r := range ch {
		if r.Error != nil && rerr == nil {
			rerr = r.Error
		}
		for _, s := range r.Stats {
			mem, found = s.MemUsage, true
		}
	}
	if rerr != nil {
		// Podman 4.3 sends a failure as {"Error":{}}, which says nothing;
		// ask why.
		return 0, e.whyNot(ctx, id, fmt.Errorf("memory of container %s: %w", id, rerr))
	}
	if !found || mem == 0 {
		// 4.3 reports zeros for a stopped container rather than an error.
		if err := e.whyNot(ctx, id, nil); err != nil {
			return 0, err
		}
	}
	if !found {
		return 0, fmt.Errorf("memory of container %s: the service returned no statistics", id)
	}
	return mem, nil
}

// whyNot explains a failure on a container by inspecting it: ErrNotFound
// when it is gone, "not running" when it is stopped, else err (which may be
// nil: the container is there and running).
func (e *Engine) whyNot(ctx context.Context, id string, err error) error {
	d, ierr := containers.Inspect(ctx, id, nil)
	switch {
	case apiCode(ierr) == http.StatusNotFound:
		return fmt.Errorf("container %s: %w", id, engine.ErrNotFound)
	case ierr == nil && d.State != nil && !d.State.Running:
		return fmt.Errorf("container %s is not running (%s)", id, d.State.Status)
	}
	return err
}

// LogTail returns the container's last lines of output.
func (e *Engine) LogTail(ctx context.Context, id string, lines int) (v string, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	// The bindings send each frame on an unbuffered channel and block until
	// it is read, so one goroutine drains both while Logs runs.
	ch := make(chan string)
	var b strings.Builder
	done := make(chan struct{})
	go func() {
		for s := range ch {
			if b.Len() < 64<<10 {
				b.WriteString(s)
			}
		}
		close(done)
	}()
	opts := new(containers.LogOptions).WithTail(strconv.Itoa(lines)).WithStdout(true).WithStderr(true)
	err = containers.Logs(ctx, id, opts, ch, ch)
	close(ch)
	<-done
	if err != nil {
		return b.String(), notFound(err, "logs of container %s", id)
	}
	return b.String(), nil
}
