//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/podman"
	"github.com/stem-edu/stem/internal/testenv/leftover"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// Attacks from a process of the sandbox (started as the CLI is, through
// the engine's exec) on each restriction of the hardened sandbox. Each
// attack aims at a canary: a host file in the card (mounted read-write,
// as at full) or the agent's home, or a file in the image. Each has a
// control that shows the attack worked: the sandbox as it was before
// (the engine's defaults: root, default capabilities, writable image),
// or, for no-new-privileges, the hardened sandbox without that one flag.

// attack is a shell script run in the sandbox; canary is the file it
// must not make (a host path, or an image path checked in the sandbox).
type attack struct {
	name, script, canary string
	inImage              bool
	// control names the spec the attack works against: "old" (before the
	// hardening) or "no-nnp" (hardened but for no-new-privileges).
	control string
}

// world is one card and agent directory on the host, and the probe
// programs the attacks use.
type world struct {
	card, home, run, conf, empty, suid string
}

func newWorld(t *testing.T, uid, gid int) world {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	w := world{card: filepath.Join(base, "card"), home: filepath.Join(base, "home"), run: filepath.Join(base, "run"),
		conf: filepath.Join(base, "box"), empty: filepath.Join(base, "empty"), suid: filepath.Join(base, "bin", "suid-touch")}
	for _, d := range []string{w.card, w.home, w.run, w.conf, w.empty, filepath.Dir(w.suid), filepath.Join(w.card, "rootdir"), filepath.Join(w.card, "sealed")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// rootdir: root's (the card's owner under rootful Podman); sealed:
	// nobody may write it but with CAP_DAC_OVERRIDE.
	os.Chmod(filepath.Join(w.card, "sealed"), 0o555)
	if err := os.Lchown(w.home, uid, gid); err != nil {
		t.Fatal(err)
	}
	// A setuid-root program (as a custom provider's host program could
	// be): touch, which creates a file as its effective user.
	data, err := os.ReadFile("/usr/bin/touch")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.suid, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w.suid, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w world) attacks() []attack {
	return []attack{
		// Remounting, also as root of a user namespace of its own (which
		// Podman's seccomp profile lets it make).
		{name: "write the image (remounting / first)", control: "old", inImage: true, canary: "/usr/local/bin/CANARY-rootfs",
			script: "mount -o remount,rw / 2>/dev/null; unshare -Urm sh -c 'mount -o remount,rw / && touch /usr/local/bin/CANARY-rootfs' 2>/dev/null; " +
				"touch /usr/local/bin/CANARY-rootfs"},
		{name: "write a root-owned directory of the card (the user)", control: "old", canary: filepath.Join(w.card, "rootdir", "CANARY-user"),
			script: "touch " + filepath.Join(w.card, "rootdir", "CANARY-user")},
		{name: "write a sealed directory of the card (CAP_DAC_OVERRIDE)", control: "old", canary: filepath.Join(w.card, "sealed", "CANARY-caps"),
			script: "touch " + filepath.Join(w.card, "sealed", "CANARY-caps")},
		{name: "give a file away (CAP_CHOWN)", control: "old", canary: filepath.Join(w.home, "CANARY-chown"),
			script: "f=$HOME/c; touch $f && chown 4242:4242 $f && mv $f $HOME/CANARY-chown"},
		{name: "a setuid-root program", control: "no-nnp", canary: filepath.Join(w.card, "rootdir", "CANARY-suid"),
			script: w.suid + " " + filepath.Join(w.card, "rootdir", "CANARY-suid")},
		{name: "become root of a user namespace", control: "old", canary: filepath.Join(w.home, "CANARY-userns"),
			script: "unshare -Ur true && touch $HOME/CANARY-userns"},
		{name: "run a program from /tmp", control: "old", canary: filepath.Join(w.home, "CANARY-tmpexec"),
			script: "cp /usr/bin/touch /tmp/t && /tmp/t $HOME/CANARY-tmpexec"},
	}
}

func connect(t *testing.T) engine.Engine {
	t.Helper()
	needs.Real(t, "Podman and the agent image")
	if os.Geteuid() != 0 {
		t.Skip("runs rootful Podman as root (the rootless sandbox: internal/agent e2e_rootless_test.go)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := podman.Connect(ctx, podman.Options{StartService: true, LogDir: filepath.Join(os.TempDir(), "stem-podman-service")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ImageInspect(ctx, sandbox.Image); err != nil {
		t.Fatalf("the agent image (make agent-image): %v", err)
	}
	return e
}

// boxSpec is the sandbox of an agent at full on w's card, its command a
// sleep (the forwarder is not needed here).
func boxSpec(t *testing.T, w world, uid, gid int) engine.Spec {
	t.Helper()
	s, err := sandbox.Spec(sandbox.Options{AgentID: fmt.Sprintf("hardtest%d", time.Now().UnixNano()%1e9), Instance: "hardening-test",
		CardPath: w.card, CardWritable: true, WorkDir: w.card, HostRunDir: w.run, HostConfDir: w.conf, HostHome: w.home,
		HostMCPBinary: "/usr/bin/true", Programs: []string{w.suid}, Masked: nil, Empty: w.empty, User: sandbox.Identity{UID: uid, GID: gid, HostUID: uid},
		ReadOnlyCardParts: sandbox.CardGit(w.card)})
	if err != nil {
		t.Fatal(err)
	}
	s.Command = []string{"sleep", "infinity"}
	s.Labels[leftover.Label] = leftover.Owner()
	return s
}

// run creates and starts spec and returns a function that runs a script
// in it the way the supervisor starts the CLI (exec, the container's
// user, HOME set).
func run(t *testing.T, e engine.Engine, spec engine.Spec) func(script string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := e.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.Remove(ctx, id, true)
	})
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	return func(script string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out bytes.Buffer
		code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"bash", "-c", script}, Env: map[string]string{"HOME": sandbox.Home},
			WorkDir: spec.WorkDir, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return code, out.String()
	}
}

func TestHardenedSandboxResistsAttacks(t *testing.T) {
	e := connect(t)
	uid, gid := sandbox.AgentUID, sandbox.AgentUID
	w := newWorld(t, uid, gid)
	hard := boxSpec(t, w, uid, gid)
	// The sandbox before the hardening: the same spec with the engine's
	// defaults.
	old := hard
	old.Name += "-old"
	old.User, old.IDMap, old.DropAllCaps, old.NoNewPrivileges, old.NoNewNamespaces, old.ReadOnlyRoot, old.Tmpfs = "", nil, false, false, false, false, nil
	noNNP := hard
	noNNP.Name += "-nonnp"
	noNNP.NoNewPrivileges = false
	boxes := map[string]func(string) (int, string){"hardened": run(t, e, hard), "old": run(t, e, old), "no-nnp": run(t, e, noNNP)}

	exists := func(box string, a attack) bool {
		if a.inImage {
			code, _ := boxes[box]("test -e " + a.canary)
			return code == 0
		}
		_, err := os.Stat(a.canary)
		return err == nil
	}
	for _, a := range w.attacks() {
		t.Run(a.name, func(t *testing.T) {
			code, out := boxes["hardened"](a.script)
			if exists("hardened", a) {
				t.Fatalf("the attack worked in the hardened sandbox (exit %d): %s", code, out)
			}
			t.Logf("hardened: exit %d: %.200s", code, strings.TrimSpace(out))
			code, out = boxes[a.control](a.script)
			if !exists(a.control, a) {
				t.Fatalf("control (%s): the attack did not work there either (exit %d: %s); the test proves nothing", a.control, code, out)
			}
			if !a.inImage {
				os.Remove(a.canary)
			}
		})
	}

	// What the CLI's process is, read from its own /proc entry.
	_, status := boxes["hardened"]("cat /proc/self/status")
	for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), "NoNewPrivs:\t1",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(status, want) {
			t.Errorf("the sandbox's process lacks %q:\n%s", want, status)
		}
	}
	// The scratch space the CLIs need is there: home and /tmp.
	if code, out := boxes["hardened"]("touch $HOME/ok /tmp/ok && echo ok"); code != 0 {
		t.Errorf("home or /tmp not writable: %s", out)
	}
}

// TestCardGitStaysTheHostsAtFull: at full the sandbox writes the card, as
// the student's rootless sandbox does (the student's uid owns it), and a
// process in it (a shell escape the container typed) replaces the card's
// .git with a copy holding a hook. With the card's .git a read-only mount
// point (CardGit) nothing changes and git on the host runs nothing; the
// control is the layout sandboxes had before, only .git/hooks and
// .git/config read-only, where the copy takes the hook and git on the
// host runs it.
func TestCardGitStaysTheHostsAtFull(t *testing.T) {
	e := connect(t)
	uid, gid := sandbox.AgentUID, sandbox.AgentUID
	needs.Program(t, "git", "git")
	// The control: the sandbox's mounts with the card's .git replaced by
	// the read-only parts sandboxes had before.
	before := func(card string, ms []engine.Mount) []engine.Mount {
		var out []engine.Mount
		for _, m := range ms {
			if m.Dest != filepath.Join(card, ".git") {
				out = append(out, m)
			}
		}
		for _, p := range []string{filepath.Join(card, ".git", "hooks"), filepath.Join(card, ".git", "config")} {
			out = append(out, engine.Mount{Source: p, Dest: p, ReadOnly: true})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		control bool
	}{{"hardened", false}, {"control: hooks and config read-only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, uid, gid)
			canary := filepath.Join(t.TempDir(), "CANARY-git")
			git := func(args ...string) string {
				t.Helper()
				// The student owns the card (rootless): git's ownership
				// check is theirs to pass, not this test's.
				cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.name=s", "-c", "user.email=s@x", "-C", w.card}, args...)...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			git("init", "-q")
			git("commit", "-q", "--allow-empty", "-m", "card")
			if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, gid), w.card).CombinedOutput(); err != nil {
				t.Fatalf("chown: %v %s", err, out)
			}
			spec := boxSpec(t, w, uid, gid)
			if !slices.ContainsFunc(spec.Mounts, func(m engine.Mount) bool { return m.Dest == filepath.Join(w.card, ".git") && m.ReadOnly }) {
				t.Fatalf("the sandbox at full does not mount the card's .git read-only: %+v", spec.Mounts)
			}
			if tc.control {
				spec.Mounts = before(w.card, spec.Mounts)
			}
			code, out := run(t, e, spec)(fmt.Sprintf(`cd %s && mv .git .git-old && cp -a .git-old .git && printf '#!/bin/sh\ntouch %s\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`, w.card, canary))
			t.Logf("the attack: exit %d: %.300s", code, strings.TrimSpace(out))
			git("commit", "-q", "--allow-empty", "-m", "the student's commit on the host")
			_, err := os.Stat(canary)
			if ran := err == nil; ran != tc.control {
				t.Fatalf("git on the host ran the sandbox's hook: %v (want %v); the attack printed: %s", ran, tc.control, out)
			}
		})
	}
}
