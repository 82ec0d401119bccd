//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"encoding/json"
	"fmt"
	"os"

	"go.podman.io/common/pkg/seccomp"
	"golang.org/x/sys/unix"
)

// namespaceCalls are the system calls that make or enter namespaces or
// mount filesystems. Podman's default profile allows them to every
// container (for nested containers): a process without any capability
// can still make a user namespace and be root there.
var namespaceCalls = []string{"unshare", "setns", "clone", "clone3", "mount", "umount", "umount2", "pivot_root",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr"}

// cloneNamespaceFlags are clone's flags that make a namespace.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// noNamespacesProfile is Podman's default seccomp profile (of the
// bindings' version) without namespaceCalls: clone only without a
// namespace flag (its first argument on the architectures stem runs on;
// s390 passes flags second and keeps no clone at all), clone3 answered
// ENOSYS (its flags are in memory seccomp cannot read; the C library
// then falls back to clone), the others EPERM.
func noNamespacesProfile() ([]byte, error) {
	p := seccomp.DefaultProfile()
	drop := map[string]bool{}
	for _, n := range namespaceCalls {
		drop[n] = true
	}
	var rules []*seccomp.Syscall
	for _, r := range p.Syscalls {
		names := r.Names
		if r.Name != "" {
			names = append(names, r.Name)
		}
		var keep []string
		for _, n := range names {
			if !drop[n] {
				keep = append(keep, n)
			}
		}
		if len(keep) == 0 {
			continue
		}
		c := *r
		c.Name, c.Names = "", keep
		rules = append(rules, &c)
	}
	enosys, eperm := uint(unix.ENOSYS), uint(unix.EPERM)
	rules = append(rules,
		&seccomp.Syscall{Names: []string{"clone"}, Action: seccomp.ActAllow, Comment: "clone without a namespace flag",
			Args:     []*seccomp.Arg{{Index: 0, Value: cloneNamespaceFlags, ValueTwo: 0, Op: seccomp.OpMaskedEqual}},
			Excludes: seccomp.Filter{Arches: []string{"s390", "s390x"}}},
		&seccomp.Syscall{Names: []string{"clone3"}, Action: seccomp.ActErrno, Errno: "ENOSYS", ErrnoRet: &enosys, Args: []*seccomp.Arg{}},
	)
	var denied []string
	for _, n := range namespaceCalls {
		if n != "clone" && n != "clone3" {
			denied = append(denied, n)
		}
	}
	rules = append(rules, &seccomp.Syscall{Names: denied, Action: seccomp.ActErrno, Errno: "EPERM", ErrnoRet: &eperm, Args: []*seccomp.Arg{}})
	p.Syscalls = rules
	return json.Marshal(p)
}

// writeProfile writes the profile where the service reads it when it
// creates the container (it keeps the rules, not the file); remove it
// after Create.
func writeProfile() (string, error) {
	data, err := noNamespacesProfile()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "stem-seccomp-*.json")
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	return f.Name(), nil
}
