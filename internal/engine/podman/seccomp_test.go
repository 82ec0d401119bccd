//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"encoding/json"
	"slices"
	"testing"

	"go.podman.io/common/pkg/seccomp"
)

func TestNoNamespacesProfile(t *testing.T) {
	data, err := noNamespacesProfile()
	if err != nil {
		t.Fatal(err)
	}
	var p seccomp.Seccomp
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]int{}
	for _, r := range p.Syscalls {
		if r.Action != seccomp.ActAllow {
			continue
		}
		for _, n := range append(r.Names, r.Name) {
			allowed[n]++
			if n == "clone" && (len(r.Args) != 1 || r.Args[0].Op != seccomp.OpMaskedEqual || r.Args[0].Value&cloneNamespaceFlags != cloneNamespaceFlags || r.Args[0].ValueTwo != 0) {
				t.Errorf("clone allowed with a namespace flag: %+v", r.Args)
			}
		}
	}
	for _, n := range namespaceCalls {
		if n != "clone" && allowed[n] > 0 {
			t.Errorf("%s is allowed", n)
		}
	}
	// The rest of the default stays: what every program needs.
	for _, n := range []string{"read", "write", "execve", "openat", "futex", "socket", "connect"} {
		if allowed[n] == 0 {
			t.Errorf("%s is not allowed", n)
		}
	}
	if !slices.Contains(namespaceCalls, "unshare") {
		t.Error("unshare is not in the list")
	}
}
