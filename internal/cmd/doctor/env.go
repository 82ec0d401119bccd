package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/cmd/factory"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/engine/podman"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/workspace"
)

// NewEnv describes the account running stemctl, with the real host. The
// directories are worked out here rather than through the Factory's,
// which fail (or make the runtime directory) where doctor must report.
func NewEnv(f *cmdutil.Factory) (*doctor.Env, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	name, home := f.Getenv("USER"), f.Getenv("HOME")
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
		if home == "" {
			home = u.HomeDir
		}
	}
	if home == "" {
		return nil, fmt.Errorf("cannot find the home directory: set HOME")
	}
	runtime := f.Getenv("XDG_RUNTIME_DIR")
	if runtime == "" {
		runtime = filepath.Join("/run/user", strconv.Itoa(uid))
	}
	state := filepath.Join(home, ".local", "state", "stem")
	if d, err := f.Dirs(); err == nil {
		state = d.State
	}
	e := &doctor.Env{
		User: name, UID: uid, GID: gid, Home: home, Runtime: runtime,
		Workspace:   workspace.DefaultRoot(f.Getenv, home),
		SubIDs:      idmap.DefaultFiles,
		LingerDir:   "/var/lib/systemd/linger",
		SystemdDir:  "/run/systemd/system",
		TmpfilesDir: "/etc/tmpfiles.d",
		CgroupRoot:  "/sys/fs/cgroup",
		StorageConf: storageConfPath(f.Getenv, home),
		Fuse:        "/dev/fuse",
		SSHD:        "/usr/sbin/sshd",
		Images:      Images(),
		LookPath:    exec.LookPath,
		Output:      output,
		MCP:         func() (string, error) { return factory.FindMCP(f.Getenv, f.Self) },
		Now:         time.Now,
	}
	e.Connect = func(ctx context.Context) (doctor.Engine, doctor.Service, error) {
		eng, err := podman.Connect(ctx, podman.Options{StartService: true, LogDir: state, Getenv: f.Getenv})
		if err != nil {
			return nil, doctor.Service{}, err
		}
		v, err := eng.Ping(ctx)
		if err != nil {
			return nil, doctor.Service{}, err
		}
		return eng, doctor.Service{URI: eng.URI(), Version: v, Started: eng.Service() != nil}, nil
	}
	return e, nil
}

// storageConfPath is where the account's Podman reads its storage.conf.
func storageConfPath(getenv func(string) string, home string) string {
	if p := getenv("CONTAINERS_STORAGE_CONF"); p != "" {
		return p
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "containers", "storage.conf")
	}
	return filepath.Join(home, ".config", "containers", "storage.conf")
}

// Images are the images stem uses: each profile's, then the agent
// sandbox's.
func Images() []doctor.Image {
	var out []doctor.Image
	for _, n := range profiles.Names() {
		if p, err := profiles.Get(n); err == nil {
			out = append(out, doctor.Image{Name: n, Ref: p.Image, Label: "io.stem.profile", Value: n})
		}
	}
	return append(out, doctor.Image{Name: "agent", Ref: sandbox.Image, Label: "io.stem.role", Value: "agent-sandbox", Agent: true})
}

// output runs a program and returns its stdout; a failure carries its
// stderr.
func output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return stdout.String(), fmt.Errorf("%w: %s", err, msg)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}
