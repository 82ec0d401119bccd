//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os/exec"
	"strings"
	"syscall"

	"github.com/stem-edu/stem/internal/engine"
)

// HintError is an engine error together with what the user can do about it.
type HintError struct {
	Err  error
	Hint string
	// Service, when set, says which configuration the Podman service runs
	// with (a line of its own after the hint).
	Service string
}

func (e *HintError) Error() string {
	s := e.Err.Error() + "\n  hint: " + e.Hint
	if e.Service != "" {
		s += "\n  service: " + e.Service
	}
	return s
}

func (e *HintError) Unwrap() error { return e.Err }

// Hints, matched against the error text (the service reports OCI runtime
// failures only as text). Each pattern was seen on a real host; see
// explain_test.go.
const (
	hintCrunCgroups = `crun cannot run containers on this host's hybrid cgroup layout. ` +
		`Use runc instead: install it (apt-get install runc) and set [engine] runtime = "runc" ` +
		`in containers.conf (~/.config/containers/containers.conf, or the file CONTAINERS_CONF names; ` +
		`stem's containers/containers.conf is such a file for CI hosts), then restart the Podman service`
	hintNoPodman = `Podman is not installed: apt-get install podman runc catatonit (or run make setup, which installs everything stem needs)`
	hintRlimit   = `the runtime may not raise the container's resource limits to podman's defaults ` +
		`(this host's hard limits are lower and the service lacks CAP_SYS_RESOURCE). ` +
		`Set [containers] default_ulimits = ["nofile=N:N", "nproc=4096:4096"] in containers.conf, with N your ulimit -Hn (equal values: Podman 4.3's service swaps soft and hard) ` +
		`(stem's containers/containers.conf works on such hosts, via CONTAINERS_CONF), then restart the Podman service`
	hintRlimitSwapped = `the container's soft resource limit is above its hard limit. Podman 4.3's API service ` +
		`swaps the two values of default_ulimits in containers.conf; give each limit equal soft and hard values ` +
		`(e.g. "nofile=20000:20000", as stem's containers/containers.conf does), then restart the Podman service`
	hintRuntimeMissing = `the OCI runtime podman is configured to use is missing or cannot run ` +
		"(try `runc --version`): install runc or crun (apt-get install runc), or fix [engine] runtime " +
		`in containers.conf, then restart the Podman service`
	hintImage = `stem's images are built locally, never pulled: run ` +
		"`make images` (scripts/build-images.sh) in the stem checkout; " +
		"`stemctl doctor` lists every image this account lacks and how to get it"
	hintPermission = `the Podman socket belongs to another user. Use your own rootless service ` +
		"(`systemctl --user enable --now podman.socket`, and unset CONTAINER_HOST), " +
		`or run stem as the socket's owner`
)

// ExplainError adds a hint to errors whose cause the user can fix: crun
// refusing the cgroup layout, rlimits above the hard limits or with soft above
// hard, a missing OCI
// runtime, a missing image, a socket that is not ours, a service that is not
// running. Other errors, nil, and errors already explained are returned as
// they are. The result still wraps err (errors.Is/As keep working).
func ExplainError(err error) error {
	if err == nil {
		return nil
	}
	var he *HintError
	if errors.As(err, &he) {
		return err
	}
	var nr *NotRunningError
	if errors.As(err, &nr) {
		return err // its message already says how to start the service
	}
	msg := strings.ToLower(err.Error())
	switch {
	case (errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) && strings.Contains(msg, "fork/exec")) && strings.Contains(msg, "podman"):
		return &HintError{Err: err, Hint: hintNoPodman}
	case strings.Contains(msg, "cgroups in hybrid mode not supported"):
		return &HintError{Err: err, Hint: hintCrunCgroups}
	case strings.Contains(msg, "rlimit") && strings.Contains(msg, "operation not permitted"):
		return &HintError{Err: err, Hint: hintRlimit}
	case strings.Contains(msg, "rlimit") && strings.Contains(msg, "invalid argument"):
		return &HintError{Err: err, Hint: hintRlimitSwapped}
	case strings.Contains(msg, "oci runtime attempted to invoke a command that was not found"),
		strings.Contains(msg, "no valid executable found for oci runtime"),
		strings.Contains(msg, "no logs from conmon"),
		strings.Contains(msg, "default oci runtime") && strings.Contains(msg, "not found"):
		return &HintError{Err: err, Hint: hintRuntimeMissing}
	case errors.Is(err, engine.ErrNotFound) && strings.Contains(msg, "image"),
		strings.Contains(msg, "image not known"),
		strings.Contains(msg, "no such image"):
		return &HintError{Err: err, Hint: hintImage}
	case isDialError(err) && errors.Is(err, syscall.EACCES),
		strings.Contains(msg, "dial unix") && strings.Contains(msg, "permission denied"):
		return &HintError{Err: err, Hint: hintPermission}
	case isDialError(err) && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)),
		strings.Contains(msg, "dial unix") && (strings.Contains(msg, "no such file or directory") || strings.Contains(msg, "connection refused")):
		return &HintError{Err: err, Hint: "the Podman service is not running: " + startHint(socketURI(err.Error()))}
	}
	return err
}

// isDialError reports whether err came from connecting to the service.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// socketURI digs the socket path out of a "dial unix PATH: ..." message.
func socketURI(msg string) string {
	const marker = "dial unix "
	i := strings.Index(msg, marker)
	if i < 0 {
		return DefaultURI(nil)
	}
	rest := msg[i+len(marker):]
	if j := strings.IndexByte(rest, ':'); j >= 0 {
		rest = rest[:j]
	}
	return fmt.Sprintf("unix://%s", rest)
}
