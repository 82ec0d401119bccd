package instance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/workspace"
)

func resolved(t *testing.T, profile, target, series, card, task string) *workspace.Resolved {
	t.Helper()
	p, err := profiles.Get(profile)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := p.ResolveTarget(target)
	if err != nil {
		t.Fatal(err)
	}
	return &workspace.Resolved{Workspace: "/ws", Series: series, Card: card, CardPath: "/ws/" + series + "/" + card,
		TaskID: task, TaskDir: "/ws/" + series + "/" + card + "/t" + task, Profile: p, Target: tg}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ profile, target, want string }{
		{"hazard3-sim", "", "hazard3-sim-inf-bss-t4"},
		{"native-amd64", "", "native-amd64-inf-bss-t4"},
		{"rp2350", "rp2350-rv", "rp2350-inf-bss-t4-rv"},
		{"rp2350", "rp2350-arm", "rp2350-inf-bss-t4-arm"},
	} {
		if got := Name(resolved(t, c.profile, c.target, "inf", "bss", "4")); got != c.want {
			t.Errorf("%s/%s: %s, want %s", c.profile, c.target, got, c.want)
		}
	}
}

func mcpBinary(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "stem-mcp")
	os.WriteFile(p, []byte("#!/bin/true\n"), 0o755)
	return p
}

func TestPlanSpecAndHash(t *testing.T) {
	l := sockets.Layout{Runtime: "/run/user/1000"}
	bin := mcpBinary(t)
	r := resolved(t, "hazard3-sim", "", "inf", "bss", "4")
	p, err := NewPlan(r, PlanOptions{Layout: l, ImageID: "img1", MCPBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	if p.Name != "hazard3-sim-inf-bss-t4" || s.Name != p.Name+"-"+sockets.ThreadKey("/ws") || s.Labels[labels.Instance] != p.Name || s.Labels[labels.ConfigHash] != p.ConfigHash || s.Labels[labels.Schema] != labels.SchemaVersion {
		t.Fatalf("labels %v", s.Labels)
	}
	if s.Network != "none" || !s.Init || s.MemoryMiB == 0 || s.Pids == 0 {
		t.Fatalf("limits not applied: %+v", s)
	}
	same := map[string]bool{}
	for _, m := range s.Mounts {
		same[m.Source] = m.Source == m.Dest
	}
	if !same[r.CardPath] || !same[p.InstanceDir] {
		t.Fatalf("card and socket dirs must be mounted at the same path: %+v", s.Mounts)
	}
	if s.Env["STEM_INSTANCE_DIR"] != p.InstanceDir || !strings.HasPrefix(p.InstanceDir, l.Root()) {
		t.Fatalf("env %v", s.Env)
	}
	// Same inputs, same hash; each relevant change gives a new one.
	again, _ := NewPlan(r, PlanOptions{Layout: l, ImageID: "img1", MCPBinary: bin})
	if again.ConfigHash != p.ConfigHash {
		t.Fatal("hash is not stable")
	}
	other, _ := NewPlan(r, PlanOptions{Layout: l, ImageID: "img2", MCPBinary: bin})
	if other.ConfigHash == p.ConfigHash {
		t.Fatal("a new image id must change the hash")
	}
	os.WriteFile(bin, []byte("#!/bin/true\n# rebuilt\n"), 0o755)
	rebuilt, _ := NewPlan(r, PlanOptions{Layout: l, ImageID: "img1", MCPBinary: bin})
	if rebuilt.ConfigHash == p.ConfigHash {
		t.Fatal("a rebuilt stem-mcp must change the hash")
	}
	r2 := resolved(t, "hazard3-sim", "", "inf", "bss", "4")
	r2.CardPath = "/elsewhere"
	moved, _ := NewPlan(r2, PlanOptions{Layout: l, ImageID: "img1", MCPBinary: bin})
	if moved.ConfigHash == rebuilt.ConfigHash {
		t.Fatal("a moved card must change the hash")
	}
}

func TestDevicePolicy(t *testing.T) {
	l := sockets.Layout{Runtime: "/run/user/1000"}
	bin := mcpBinary(t)
	if _, err := NewPlan(resolved(t, "native-amd64", "", "d", "h", "1"), PlanOptions{Layout: l, MCPBinary: bin, Devices: []string{"/dev/null"}}); err == nil {
		t.Fatal("native-amd64 accepted a device")
	}
	rp := resolved(t, "rp2350", "rp2350-rv", "d", "h", "3")
	acm := usbNode(t)
	p, err := NewPlan(rp, PlanOptions{Layout: l, MCPBinary: bin, Devices: []string{acm}})
	if err != nil || len(p.Spec.Devices) != 1 || p.Spec.Env["STEM_DEVICE"] != acm {
		t.Fatalf("rp2350 device: %+v %v", p, err)
	}
	// Character devices that are not USB never go in.
	for _, bad := range []string{"/dev/null", "/dev/mem", "/dev/kmsg", "/dev/tty", "/dev/zero"} {
		if _, err := os.Stat(bad); err != nil {
			continue
		}
		if _, err := NewPlan(rp, PlanOptions{Layout: l, MCPBinary: bin, Devices: []string{bad}}); err == nil || !strings.Contains(err.Error(), "not a USB device") {
			t.Errorf("device %s: %v", bad, err)
		}
	}
	for _, bad := range []string{"ttyACM0", "/dev/does-not-exist", "/etc/passwd", "/tmp"} {
		if _, err := NewPlan(rp, PlanOptions{Layout: l, MCPBinary: bin, Devices: []string{bad}}); err == nil {
			t.Errorf("device %q accepted", bad)
		}
	}
	// A symlink into /dev resolves to the real node; one out of /dev is refused.
	link := filepath.Join(t.TempDir(), "board")
	os.Symlink(acm, link)
	if p, err := NewPlan(rp, PlanOptions{Layout: l, MCPBinary: bin, Devices: []string{link}}); err != nil || p.Spec.Devices[0] != acm {
		t.Fatalf("symlinked device: %v", err)
	}
	p0, _ := NewPlan(rp, PlanOptions{Layout: l, MCPBinary: bin})
	if len(p0.Spec.Devices) != 0 || p0.ConfigHash == p.ConfigHash {
		t.Fatal("no device by default, and devices change the hash")
	}
}

func TestPlanRejectsLongRuntime(t *testing.T) {
	l := sockets.Layout{Runtime: "/tmp/" + strings.Repeat("r", 70)}
	if _, err := NewPlan(resolved(t, "native-amd64", "", "d", "h", "1"), PlanOptions{Layout: l, MCPBinary: mcpBinary(t)}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("long runtime dir: %v", err)
	}
}

func TestGitMountedReadOnly(t *testing.T) {
	card := t.TempDir()
	r := resolved(t, "native-amd64", "", "d", "h", "1")
	r.CardPath = card
	l := sockets.Layout{Runtime: "/run/user/1000"}
	gitRO := func(p *Plan) bool {
		for _, m := range p.Spec.Mounts {
			if m.ReadOnly && m.Source == filepath.Join(card, ".git") && m.Dest == m.Source {
				return true
			}
		}
		return false
	}
	// Not a repository yet: .git is mounted all the same (launch makes it
	// empty first), so the container cannot make one.
	p, err := NewPlan(r, PlanOptions{Layout: l, MCPBinary: mcpBinary(t)})
	if err != nil || len(p.Spec.Mounts) != 4 || !gitRO(p) {
		t.Fatalf("plain card: %v %+v", err, p.Spec.Mounts)
	}
	if _, err := os.Lstat(filepath.Join(card, ".git")); err == nil {
		t.Fatal("planning made .git: only launch may (a refused up changes nothing)")
	}
	os.MkdirAll(filepath.Join(card, ".git", "hooks"), 0o755)
	p, err = NewPlan(r, PlanOptions{Layout: l, MCPBinary: mcpBinary(t)})
	if err != nil || len(p.Spec.Mounts) != 4 || !gitRO(p) {
		t.Fatalf("repository: %v %+v", err, p.Spec.Mounts)
	}
	// A symlinked .git is refused.
	os.RemoveAll(filepath.Join(card, ".git"))
	os.Symlink(t.TempDir(), filepath.Join(card, ".git"))
	if _, err := NewPlan(r, PlanOptions{Layout: l, MCPBinary: mcpBinary(t)}); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("a symlinked .git: %v", err)
	}
}

// usbNode makes a character device node with the CDC ACM major (what a Pico
// or a Debug Probe's UART is) under /dev, as a stand-in for a plugged-in
// board; it needs root (CI runs as root).
func usbNode(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a device node under /dev and needs root (CI runs as root)")
	}
	node := fmt.Sprintf("/dev/stemtest-acm-%d", os.Getpid())
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(166, 250))); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatalf("mknod %s: %v", node, err)
	}
	t.Cleanup(func() { os.Remove(node) })
	return node
}
