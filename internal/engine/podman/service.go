//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// configHint reports whether hint's fix is a containers.conf setting,
// which the service reads once, when it starts.
func configHint(hint string) bool {
	switch hint {
	case hintCrunCgroups, hintRlimit, hintRlimitSwapped, hintRuntimeMissing:
		return true
	}
	return false
}

// withServiceNote adds serviceNote to an explained OCI runtime failure: a
// service started from a shell without CONTAINERS_CONF (by stemctl itself,
// which passes its own environment on) keeps failing every container until
// it is restarted, whatever the user's shell says now.
func (e *Engine) withServiceNote(err error) error {
	he, ok := err.(*HintError)
	if !ok || !configHint(he.Hint) || he.Service != "" {
		return err
	}
	note := e.serviceNote()
	if note == "" {
		return err
	}
	return &HintError{Err: he.Err, Hint: he.Hint, Service: note}
}

// serviceNote says which CONTAINERS_CONF the service behind the engine's
// unix socket runs with, and what to do when it is not the caller's. It is
// empty when that cannot be told (not a unix socket, a listener that is not
// podman, such as systemd's socket activation, or /proc not readable).
func (e *Engine) serviceNote() string {
	path, ok := unixPath(e.uri)
	if !ok {
		return ""
	}
	pid, err := peerPID(path)
	if err != nil || pid <= 0 {
		return ""
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "podman" {
		return ""
	}
	theirs, theirsSet, err := environValue(pid, "CONTAINERS_CONF")
	if err != nil {
		return ""
	}
	getenv := e.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	mine := getenv("CONTAINERS_CONF")
	describe := func(v string, set bool) string {
		if !set || v == "" {
			return "CONTAINERS_CONF unset"
		}
		return "CONTAINERS_CONF=" + v
	}
	s := fmt.Sprintf("the Podman service at %s (pid %d) runs with %s", e.uri, pid, describe(theirs, theirsSet))
	if mine != theirs {
		return s + fmt.Sprintf(", not your %s: stop it (kill %d) and run stemctl again, which starts the service with yours", describe(mine, mine != ""), pid)
	}
	return s + fmt.Sprintf("; once the setting is fixed, stop it (kill %d) and run stemctl again, which starts the service with your CONTAINERS_CONF", pid)
}

// peerPID is the pid of the process listening on a unix socket
// (SO_PEERCRED of a connection to it).
func peerPID(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, probeTimeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// environValue reads one variable of process pid's environment.
func environValue(pid int, name string) (string, bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok && string(k) == name {
			return string(v), true, nil
		}
	}
	return "", false, nil
}
