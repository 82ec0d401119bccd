package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
)

const installPodman = "apt-get install podman runc catatonit uidmap slirp4netns fuse-overlayfs"

// info is what `podman info` says about the account's Podman.
type info struct {
	Installed                         bool
	Err                               error
	Version, Driver, Cgroups, Runtime string
}

func podmanInfo(ctx context.Context, e *Env) info {
	if _, err := e.LookPath("podman"); err != nil {
		return info{Err: err}
	}
	out, err := e.Output(ctx, "podman", "info", "--format",
		"{{.Version.Version}}|{{.Store.GraphDriverName}}|{{.Host.CgroupsVersion}}|{{.Host.OCIRuntime.Name}}")
	if err != nil {
		return info{Installed: true, Err: fmt.Errorf("podman info: %w", err)}
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	if len(f) != 4 {
		return info{Installed: true, Err: fmt.Errorf("podman info: unexpected answer %q", out)}
	}
	return info{Installed: true, Version: f[0], Driver: f[1], Cgroups: f[2], Runtime: f[3]}
}

func checkPodman(e *Env, pi info) Result {
	r := Result{Name: "podman", Required: true}
	switch {
	case !pi.Installed:
		r.Status, r.Detail, r.Fix = Fail, "podman is not installed", e.asRoot(installPodman)
	case pi.Err != nil:
		r.Status, r.Detail = Fail, firstLine(pi.Err.Error())
		r.Fix = "podman info (its error says what this account's Podman lacks; see docs/install.md)"
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("Podman %s, runtime %s", pi.Version, pi.Runtime)
	}
	return r
}

func connect(ctx context.Context, e *Env, pi info) (Engine, Service, error) {
	if !pi.Installed {
		return nil, Service{}, fmt.Errorf("podman is not installed")
	}
	return e.Connect(ctx)
}

func checkService(svc Service, err error) Result {
	r := Result{Name: "podman-service", Required: true}
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, firstLine(err.Error()), hintOf(err.Error())
		if r.Fix == "" {
			r.Fix = "podman system service --time=0 &   (in the foreground, its own error shows)"
		}
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("answers at %s (Podman %s)", svc.URI, svc.Version)
	if svc.Started {
		r.Detail += ", started by stemctl now"
	}
	return r
}

func checkStorage(e *Env, pi info) Result {
	r := Result{Name: "storage-driver"}
	switch {
	case pi.Driver == "":
		r.Status, r.Detail = Warn, "unknown: podman info did not answer"
	case pi.Driver == "overlay":
		r.Status, r.Detail = OK, "overlay"
	default:
		r.Status = Warn
		r.Detail = pi.Driver + ": every new container copies its whole image, so stemctl up takes many seconds"
		r.Fix = `mkdir -p ~/.config/containers && printf '[storage]\ndriver = "overlay"\n' > ~/.config/containers/storage.conf && podman system reset   (reset deletes this account's images: load them again)`
	}
	return r
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC.
const cgroup2Magic = 0x63677270

func cgroupVersion(e *Env, pi info) string {
	if pi.Cgroups != "" {
		return pi.Cgroups
	}
	var st unix.Statfs_t
	if unix.Statfs(e.CgroupRoot, &st) == nil && st.Type == cgroup2Magic {
		return "v2"
	}
	return "v1"
}

func checkCgroups(e *Env, pi info) Result {
	r := Result{Name: "cgroups", Status: OK}
	v := cgroupVersion(e, pi)
	switch {
	case !e.Rootless():
		r.Detail = "cgroups " + v + ": the profiles' memory, pids and CPU limits apply"
	case v == "v1":
		r.Status = Warn
		r.Detail = "cgroups v1: rootless Podman ignores the profiles' memory, pids and CPU limits on this host"
		r.Fix = "(as root) boot with systemd.unified_cgroup_hierarchy=1 (cgroups v2) and delegate memory, pids and cpu to users"
	default:
		uid := strconv.Itoa(e.UID)
		ctl := filepath.Join(e.CgroupRoot, "user.slice", "user-"+uid+".slice", "user@"+uid+".service", "cgroup.controllers")
		data, err := os.ReadFile(ctl)
		have := strings.Fields(string(data))
		var missing []string
		for _, c := range []string{"memory", "pids", "cpu"} {
			if !contains(have, c) {
				missing = append(missing, c)
			}
		}
		if err != nil || len(missing) > 0 {
			r.Status = Warn
			r.Detail = fmt.Sprintf("cgroups v2, but %s not delegated to this account: those limits of the profiles do not apply", strings.Join(missing, ", "))
			r.Fix = `(as root) mkdir -p /etc/systemd/system/user@.service.d && printf '[Service]\nDelegate=memory pids cpu\n' > /etc/systemd/system/user@.service.d/delegate.conf && systemctl daemon-reload`
			return r
		}
		r.Detail = "cgroups v2 with memory, pids and cpu delegated: the profiles' limits apply"
	}
	return r
}

// checkRuntime starts a container that exits at once, from the first
// image present, on the ids stemctl up gives containers: an OCI runtime
// refusal (crun on a hybrid cgroup layout, rlimits above the host's)
// shows here rather than at up.
func checkRuntime(ctx context.Context, e *Env, eng Engine, connErr error, image string) Result {
	r := Result{Name: "runtime", Required: true}
	switch {
	case connErr != nil:
		r.Status, r.Detail, r.Fix = Fail, "not tried: no Podman service", "see podman-service"
		return r
	case image == "":
		r.Status, r.Detail, r.Fix = Warn, "not tried: no stem image to start a container from", "see the images below"
		return r
	}
	spec := engine.Spec{
		Name:    fmt.Sprintf("stem-doctor-%d", e.Now().UnixNano()),
		Image:   image,
		Command: []string{"true"},
		Network: "none",
		Labels:  map[string]string{"io.stem.doctor": "1"},
	}
	via := "the engine's default ids"
	if m, err := callerMap(e); err == nil {
		spec.IDMap = &engine.IDMap{Base: m.EngineBase, Size: m.Size}
		via = fmt.Sprintf("host ids %d-%d", m.Host, m.Host+m.Size-1)
	}
	id, err := eng.Create(ctx, spec)
	if err == nil {
		err = eng.Start(ctx, id)
	}
	if id != "" {
		// Removal is best effort: the container carries io.stem.doctor.
		eng.Remove(context.WithoutCancel(ctx), id, true)
	}
	if err != nil {
		r.Status, r.Detail = Fail, firstLine(err.Error())
		r.Fix = hintOf(err.Error())
		if r.Fix == "" {
			r.Fix = "podman run --rm " + image + " true   (shows the runtime's own error; see docs/install.md, Podman)"
		}
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("a container of %s started on %s", image, via)
	return r
}

// callerMap is the id mapping stemctl up gives the account's containers.
func callerMap(e *Env) (idmap.Map, error) {
	if !e.Rootless() {
		return idmap.Map{EngineBase: idmap.RootfulBase, Host: idmap.RootfulBase, HostGID: idmap.RootfulBase, Size: idmap.Size}, nil
	}
	return idmap.Rootless(e.SubIDs, e.User, strconv.Itoa(e.UID))
}

// hintOf is the "hint:" line the engine adds to errors it can explain.
func hintOf(msg string) string {
	const marker = "hint: "
	i := strings.Index(msg, marker)
	if i < 0 {
		return ""
	}
	return firstLine(msg[i+len(marker):])
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
