package sockets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/posixacl"
)

const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func runtimeDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o700)
	return d
}

func TestKeysAreShortAndStable(t *testing.T) {
	if k := ThreadKey("/home/a/dev/workspace/stem"); len(k) != 8 || k != ThreadKey("/home/a/dev/workspace/stem") {
		t.Fatalf("thread key %q", k)
	}
	if ThreadKey("/a") == ThreadKey("/b") {
		t.Fatal("different workspaces share a thread key")
	}
	if k := InstanceKey("hazard3-sim-inf-bss-t4"); len(k) != 10 {
		t.Fatalf("instance key %q", k)
	}
}

func TestForContainerPathLengths(t *testing.T) {
	l := Layout{Runtime: "/run/user/1000"}
	d, err := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(d.Path, "/"+cid[:12]) || len(d.Tmux()) >= MaxPath {
		t.Fatalf("dir %s (%d bytes)", d.Path, len(d.Tmux()))
	}
	// A long runtime directory must be refused, with the limit named.
	long := "/tmp/" + strings.Repeat("x", 60)
	_, err = Layout{Runtime: long}.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	var tl *PathTooLongError
	if !errors.As(err, &tl) || tl.Len < MaxPath || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") {
		t.Fatalf("long runtime: %v", err)
	}
	// The boundary: every socket path strictly under MaxPath.
	for n := 1; n < 80; n++ {
		rt := "/" + strings.Repeat("r", n)
		d, err := Layout{Runtime: rt}.ForContainer("abcdef12", "abcdef1234", cid)
		if err == nil {
			for _, p := range []string{d.Tmux(), d.Nvim(), d.GDB(), filepath.Join(d.Path, AgentSocket("abcdef"))} {
				if len(p) >= MaxPath {
					t.Fatalf("accepted %d-byte socket path %s", len(p), p)
				}
			}
		} else if len(filepath.Join(rt, "stem/abcdef12/abcdef1234", cid[:12], AgentSocket("abcdef"))) < MaxPath {
			t.Fatalf("refused a path that fits: %v", err)
		}
	}
	// Where t.sock fits but an agent's socket does not, the directory is
	// refused: `up` must not make an instance no agent can join.
	rt := "/" + strings.Repeat("r", MaxPath-1-len("/")-len("/stem/abcdef12/abcdef1234/")-12-len("/"+TmuxSocket))
	if p := filepath.Join(rt, "stem/abcdef12/abcdef1234", cid[:12], TmuxSocket); len(p) != MaxPath-1 {
		t.Fatalf("t.sock path is %d bytes, want %d", len(p), MaxPath-1)
	}
	_, err = Layout{Runtime: rt}.ForContainer("abcdef12", "abcdef1234", cid)
	if !errors.As(err, &tl) || !strings.HasSuffix(tl.Path, ".sock") || !strings.Contains(tl.Path, "/a-") {
		t.Fatalf("runtime where only t.sock fits: %v", err)
	}
}

func TestForContainerRejectsBadInput(t *testing.T) {
	l := Layout{Runtime: "/run/user/1"}
	for _, c := range []struct{ th, in, id string }{
		{"../../..", InstanceKey("i"), cid},
		{ThreadKey("w"), "x/y", cid},
		{ThreadKey("w"), InstanceKey("i"), cid[:12]},
		{ThreadKey("w"), InstanceKey("i"), strings.ToUpper(cid)},
		{ThreadKey("w"), InstanceKey("i"), "../" + cid[3:]},
	} {
		if _, err := l.ForContainer(c.th, c.in, c.id); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	if _, err := (Layout{Runtime: "relative"}).ForContainer(ThreadKey("w"), InstanceKey("i"), cid); err == nil {
		t.Error("accepted a relative runtime directory")
	}
}

func TestCreateModesAndChecks(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	d, err := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(d); err != nil {
		t.Fatal(err)
	}
	for p := d.Path; p != rt; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	if err := l.Check(d); err != nil {
		t.Fatal(err)
	}
	// Loosened permissions are detected.
	os.Chmod(filepath.Dir(d.Path), 0o755)
	if err := l.Check(d); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("0755 level accepted: %v", err)
	}
	os.Chmod(filepath.Dir(d.Path), 0o700)
}

// TestACLLevels: a level whose group bits come from an ACL naming a user
// (the container's root, as cardaccess grants it) passes; one that also
// lets the owning group in, or names a group, does not.
func TestACLLevels(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	d, _ := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err := l.Create(d); err != nil {
		t.Fatal(err)
	}
	set := func(a posixacl.ACL) {
		t.Helper()
		fd, err := unix.Open(d.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := posixacl.Set(fd, false, a); err != nil {
			t.Skipf("no ACLs here: %v", err)
		}
	}
	set(posixacl.FromMode(0o700).With(100000, posixacl.RWX))
	if err := l.Check(d); err != nil {
		t.Fatalf("a level naming the container's uid: %v", err)
	}
	set(posixacl.FromMode(0o750).With(100000, posixacl.RWX))
	if err := l.Check(d); err == nil {
		t.Fatal("a level the owning group can read passed")
	}
	a := posixacl.FromMode(0o700).With(100000, posixacl.RWX)
	set(append(a, posixacl.Entry{Tag: posixacl.Group, Perm: posixacl.Read, ID: 100}))
	if err := l.Check(d); err == nil {
		t.Fatal("a level naming a group passed")
	}
	// Rootless Podman makes the runtime directory 0711 for mapped
	// containers: passing through is all it allows.
	os.Chmod(rt, 0o711)
	if err := CheckRuntime(rt); err != nil {
		t.Fatalf("0711 runtime: %v", err)
	}
	os.Chmod(rt, 0o751)
	if err := CheckRuntime(rt); err == nil {
		t.Fatal("0751 runtime passed")
	}
	os.Chmod(rt, 0o700)
}

func TestRuntimeNotOurs(t *testing.T) {
	rt := runtimeDir(t)
	os.Chmod(rt, 0o755)
	l := Layout{Runtime: rt}
	d, _ := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err := l.Create(d); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("group-readable runtime dir accepted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rt, "stem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Create changed something although it refused")
	}
	if os.Geteuid() == 0 {
		os.Chmod(rt, 0o700)
		os.Chown(rt, 65534, 65534)
		if err := l.Create(d); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("foreign runtime dir accepted: %v", err)
		}
	}
}

func TestSymlinkLevelsRefused(t *testing.T) {
	rt := runtimeDir(t)
	elsewhere := runtimeDir(t)
	l := Layout{Runtime: rt}
	th := ThreadKey("/w")
	os.Mkdir(filepath.Join(rt, "stem"), 0o700)
	// An attacker-prepared symlink at the thread level must not be followed.
	if err := os.Symlink(elsewhere, filepath.Join(rt, "stem", th)); err != nil {
		t.Fatal(err)
	}
	d, _ := l.ForContainer(th, InstanceKey("i"), cid)
	if err := l.Create(d); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlinked level accepted: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatal("Create wrote through the symlink")
	}
	if err := l.Check(d); err == nil {
		t.Fatal("Check accepted a symlinked level")
	}
}

func TestRemoveStaleKeepsCurrent(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	th, in := ThreadKey("/w"), InstanceKey("i")
	old, _ := l.ForContainer(th, in, strings.Repeat("a", 64))
	cur, _ := l.ForContainer(th, in, cid)
	for _, d := range []Dir{old, cur} {
		if err := l.Create(d); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := l.RemoveStale(th, in, cur.CID12())
	if err != nil || len(removed) != 1 || removed[0] != old.Path {
		t.Fatalf("removed %v, %v", removed, err)
	}
	if _, err := os.Stat(cur.Path); err != nil {
		t.Fatal("current directory removed")
	}
}

func TestAtomicJSON(t *testing.T) {
	dir := runtimeDir(t)
	info := ContainerInfo{ID: cid, Instance: "x"}
	if err := WriteJSON(dir, ContainerJSON, info); err != nil {
		t.Fatal(err)
	}
	var got ContainerInfo
	if err := ReadJSON(dir, ContainerJSON, &got); err != nil || got.ID != cid {
		t.Fatalf("%+v %v", got, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, ContainerJSON))
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %o", fi.Mode().Perm())
	}
	// Replacing a symlink replaces the link, never writes through it.
	target := filepath.Join(runtimeDir(t), "victim")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Remove(filepath.Join(dir, GDBSync))
	os.Symlink(target, filepath.Join(dir, GDBSync))
	if err := ReadJSON(dir, GDBSync, &got); err == nil {
		t.Fatal("ReadJSON followed a symlink")
	}
	if err := WriteJSON(dir, GDBSync, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatal("WriteJSON wrote through a symlink")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("temp files left behind: %v", ents)
	}
}

func TestCheckExistingStopsAtMissingLevels(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	inst := l.InstanceDir(ThreadKey("/w"), InstanceKey("i"))
	// Nothing below the runtime exists yet: fine, Create makes it.
	if err := l.CheckExisting(inst); err != nil {
		t.Fatalf("missing levels: %v", err)
	}
	d, _ := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err := l.Create(d); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{rt, l.Root(), filepath.Dir(inst), inst} {
		os.Chmod(p, 0o750)
		err := l.CheckExisting(inst)
		os.Chmod(p, 0o700)
		if err == nil || !strings.Contains(err.Error(), "0700") {
			t.Fatalf("%s at 0750 accepted: %v", p, err)
		}
	}
	// A symlinked level is refused, not followed.
	os.RemoveAll(inst)
	os.Symlink(t.TempDir(), inst)
	var no *NotOursError
	if err := l.CheckExisting(inst); !errors.As(err, &no) {
		t.Fatalf("symlinked instance dir: %v", err)
	}
}

func TestCheckSocketsRefusesNonSockets(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	d, _ := l.ForContainer(ThreadKey("/w"), InstanceKey("i"), cid)
	if err := l.Create(d); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSockets(); err != nil {
		t.Fatalf("no sockets yet: %v", err)
	}
	for _, p := range []string{d.Tmux(), d.Nvim(), d.GDB()} {
		for _, plant := range []func() error{
			func() error { return os.Symlink("/run/podman/podman.sock", p) },
			func() error { return os.WriteFile(p, nil, 0o600) },
		} {
			if err := plant(); err != nil {
				t.Fatal(err)
			}
			var no *NotOursError
			if err := d.CheckSockets(); !errors.As(err, &no) || no.Path != p {
				t.Fatalf("planted %s accepted: %v", p, err)
			}
			os.Remove(p)
		}
	}
}

func TestMissingRuntimeSaysWhatToDo(t *testing.T) {
	err := CheckRuntime(filepath.Join(t.TempDir(), "gone"))
	if err == nil || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing runtime dir: %v", err)
	}
}

// gdb-sync.json and container.json sit where the container can write: a
// FIFO planted there must be refused at once, not block the reader.
func TestReadJSONRefusesFIFOWithoutBlocking(t *testing.T) {
	dir := runtimeDir(t)
	if err := syscall.Mkfifo(filepath.Join(dir, GDBSync), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var v map[string]any
		done <- ReadJSON(dir, GDBSync, &v)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("ReadJSON of a FIFO: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ReadJSON blocked on a FIFO")
	}
}

// Key and id lengths, each bound and one past it.
func TestKeyAndIDLengths(t *testing.T) {
	l := Layout{Runtime: "/run/user/1000"}
	for _, c := range []struct {
		key, cid string
		ok       bool
	}{
		{strings.Repeat("a", 8), cid, true},
		{strings.Repeat("a", 16), cid, true},
		{strings.Repeat("a", 7), cid, false},
		{strings.Repeat("a", 17), cid, false},
		{"ABCDEF12", cid, false},
		{strings.Repeat("a", 8), cid[:63], false},
		{strings.Repeat("a", 8), cid + "0", false},
	} {
		if _, err := l.ForContainer(c.key, c.key, c.cid); (err == nil) != c.ok {
			t.Errorf("ForContainer(%q, %d-byte id): %v, want ok=%v", c.key, len(c.cid), err, c.ok)
		}
	}
}
