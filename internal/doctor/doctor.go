// Package doctor checks what stem needs from an account and its host:
// Podman and its service, a runtime that starts containers, subordinate
// ids, the runtime directory, ACLs, cgroups, the images, the workspace,
// the git identity and sshd. Each check is a small function returning a
// Result with the one command that fixes it, so `stemctl doctor` (and an
// administrator, for another account) sees at once what is missing
// instead of meeting it at `stemctl up`.
//
// Checks only look, with two exceptions that are the point of the check:
// a short-lived container (does the runtime start one on this account's
// ids?) and a temporary file with an ACL in the workspace and in the
// runtime directory (does the file system keep it?). Both are removed.
package doctor

import (
	"context"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
)

// Status is a check's outcome.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one check's answer.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Required says that stemctl up cannot work while this check fails.
	Required bool   `json:"required"`
	Detail   string `json:"detail"`
	// Fix is the command that fixes a failure or a warning ("" when OK).
	Fix string `json:"fix,omitempty"`
}

// Engine is the part of the container engine the checks use.
type Engine interface {
	ImageInspect(ctx context.Context, ref string) (engine.Image, error)
	Create(ctx context.Context, spec engine.Spec) (string, error)
	Start(ctx context.Context, id string) error
	Remove(ctx context.Context, id string, force bool) error
}

// Service is the Podman API service stemctl reached.
type Service struct {
	URI     string
	Version string
	// Started says stemctl started it just now (nothing answered).
	Started bool
}

// Image is an image stem needs.
type Image struct {
	// Name is what uses it: a profile's name, or "agent".
	Name string
	Ref  string
	// Label is the label and value a stem image of this role carries.
	Label, Value string
	// Agent marks the agent sandbox image (needed only for agents).
	Agent bool
}

// Env is the account being checked and the host's facilities. Tests
// replace every function and path.
type Env struct {
	User string
	UID  int
	GID  int
	Home string
	// Runtime is the account's XDG_RUNTIME_DIR (or /run/user/UID).
	Runtime   string
	Workspace string
	SubIDs    idmap.Files
	// LingerDir holds logind's linger flags (/var/lib/systemd/linger);
	// SystemdDir exists when systemd runs (/run/systemd/system).
	LingerDir, SystemdDir string
	// TmpfilesDir holds tmpfiles.d lines (/etc/tmpfiles.d): without
	// logind, one makes the runtime directory at boot.
	TmpfilesDir string
	// CgroupRoot is /sys/fs/cgroup.
	CgroupRoot string
	// StorageConf is the account's containers-storage.conf; Fuse is the
	// FUSE device (/dev/fuse).
	StorageConf, Fuse string
	// SSHD is sshd's place when it is not on PATH (/usr/sbin/sshd, which
	// an ordinary account's PATH often leaves out).
	SSHD   string
	Images []Image

	LookPath func(string) (string, error)
	// Output runs a program as the account and returns its stdout.
	Output func(ctx context.Context, name string, args ...string) (string, error)
	// Connect reaches (or starts) the Podman API service.
	Connect func(ctx context.Context) (Engine, Service, error)
	// MCP finds stem-mcp.
	MCP func() (string, error)
	// Now names the runtime check's container.
	Now func() time.Time
}

// Rootless says the account runs rootless Podman.
func (e *Env) Rootless() bool { return e.UID != 0 }

// Run runs every check in order. Checks that need the service are
// reported as failing with its error when it cannot be reached.
func Run(ctx context.Context, e *Env) []Result {
	var rs []Result
	pi := podmanInfo(ctx, e)
	rs = append(rs, checkPodman(e, pi))
	eng, svc, err := connect(ctx, e, pi)
	rs = append(rs, checkService(svc, err))
	rs = append(rs, checkSubIDs(e), checkRuntimeDir(e), checkLinger(e))
	rs = append(rs, checkStorage(e, pi), checkSharedStore(e), checkImageIDs(e), checkCgroups(e, pi))
	rs = append(rs, checkACL("acl-workspace", e.Workspace, e), checkACL("acl-runtime", e.Runtime, e))
	imgs, present := checkImages(ctx, e, eng, err)
	rs = append(rs, checkRuntime(ctx, e, eng, err, present))
	rs = append(rs, imgs...)
	rs = append(rs, checkWorkspace(e), checkGit(ctx, e), checkMCP(e), checkSSHD(e))
	return rs
}

// Failed says whether a required check failed.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Required && r.Status == Fail {
			return true
		}
	}
	return false
}

// asRoot prefixes an administrator's command for an account that is not
// root.
func (e *Env) asRoot(cmd string) string {
	if e.Rootless() {
		return "(as root) " + cmd
	}
	return cmd
}
