package cardaccess

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/posixacl"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// container is the uid the tests grant: nobody's.
const container = 4242

// TestMain doubles as the helper that acts as the container's uid:
// STEM_CARDACCESS_WRITE=path appends to path (creating it).
func TestMain(m *testing.M) {
	if p := os.Getenv("STEM_CARDACCESS_WRITE"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
		if err != nil {
			os.Exit(1)
		}
		f.Close()
		os.Exit(0)
	}
	code := m.Run()
	if helper.path != "" {
		os.RemoveAll(filepath.Dir(helper.path))
	}
	os.Exit(code)
}

var helper struct {
	once sync.Once
	path string
	err  error
}

// helperBinary is a copy of the test binary that any uid may run (the
// build's directory is private).
func helperBinary(t *testing.T) string {
	helper.once.Do(func() {
		dir, err := os.MkdirTemp("", "cardaccess")
		if err != nil {
			helper.err = err
			return
		}
		os.Chmod(dir, 0o711)
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			helper.err = err
			return
		}
		helper.path = filepath.Join(dir, "helper")
		helper.err = os.WriteFile(helper.path, data, 0o755)
	})
	if helper.err != nil {
		t.Fatal(helper.err)
	}
	return helper.path
}

// canWrite runs the helper as uid.
func canWrite(t *testing.T, uid uint32, path string) bool {
	t.Helper()
	cmd := exec.Command(helperBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), "STEM_CARDACCESS_WRITE="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return err == nil
}

// card makes a card the container's uid can reach (its parent lets
// anyone pass, as the container's mount would), with a .git, a file the
// student made 0644, an executable, a subdirectory, and a symlink to a
// file outside the card.
func card(t *testing.T) (dir, outside string) {
	needs.Root(t, "acting as another uid")
	base := openDir(t)
	dir = filepath.Join(base, "card")
	outside = filepath.Join(base, "victim")
	for _, d := range []string{"t1/sub", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "t1/hello.c"), []byte("int main;\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "t1/run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git/config"), nil, 0o644)
	os.WriteFile(outside, nil, 0o644)
	os.Symlink(outside, filepath.Join(dir, "t1/link"))
	if err := unix.Mkfifo(filepath.Join(dir, "t1/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, outside
}

func TestCardGivesTheContainerTheCard(t *testing.T) {
	t.Parallel()
	dir, outside := card(t)
	// Control: before the grant the container's uid writes nothing.
	if canWrite(t, container, filepath.Join(dir, "t1/hello.c")) {
		t.Fatal("control: the container's uid could write before the grant")
	}
	st, err := Card(dir, Grant{Container: container})
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("no ACLs here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Changed == 0 {
		t.Fatalf("nothing changed: %+v", st)
	}
	for _, p := range []string{"t1/hello.c", "t1/run.sh", "t1/new.c", "t1/sub/new.c"} {
		if !canWrite(t, container, filepath.Join(dir, p)) {
			t.Errorf("the container cannot write %s", p)
		}
	}
	// Read only in .git (it is mounted read-only anyway).
	for _, p := range []string{".git/config", ".git/hooks/pre-commit"} {
		if canWrite(t, container, filepath.Join(dir, p)) {
			t.Errorf("the container can write %s", p)
		}
	}
	// Nothing followed out of the card, nothing but files and directories.
	if a := acl(t, outside); a != nil {
		t.Errorf("the symlink's target got an ACL: %+v", a)
	}
	if a := acl(t, filepath.Join(dir, "t1/fifo")); a != nil {
		t.Errorf("the FIFO got an ACL: %+v", a)
	}
	if again, err := Card(dir, Grant{Container: container}); err != nil || again.Changed != 0 {
		t.Errorf("a second walk changed %d (%v)", again.Changed, err)
	}
	// A chmod resets the mask; the next walk repairs it.
	os.Chmod(filepath.Join(dir, "t1/hello.c"), 0o644)
	if canWrite(t, container, filepath.Join(dir, "t1/hello.c")) {
		t.Fatal("control: the container can write through a mask chmod set to r--")
	}
	if again, err := Card(dir, Grant{Container: container}); err != nil || again.Changed != 1 {
		t.Errorf("the repairing walk changed %d (%v)", again.Changed, err)
	}
	if !canWrite(t, container, filepath.Join(dir, "t1/hello.c")) {
		t.Error("the walk did not repair the mask")
	}
}

// TestDefaultsNameTheStudent: what the container makes, the student (here
// uid 4343) may change.
func TestDefaultsNameTheStudent(t *testing.T) {
	t.Parallel()
	dir, _ := card(t)
	const student = 4343
	if _, err := Card(dir, Grant{Container: container, Student: student}); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	made := filepath.Join(dir, "t1/made-by-container.c")
	if !canWrite(t, container, made) {
		t.Fatal("the container cannot create a file")
	}
	if !canWrite(t, student, made) {
		t.Error("the student cannot write what the container made")
	}
	if canWrite(t, 4444, made) {
		t.Error("a third uid can write what the container made")
	}
}

func TestSocketDirAndTraverse(t *testing.T) {
	t.Parallel()
	needs.Root(t, "acting as another uid")
	base := openDir(t)
	inst := filepath.Join(base, "inst")
	sock := filepath.Join(inst, "cid")
	os.MkdirAll(sock, 0o700)
	os.Chmod(inst, 0o700)
	g := Grant{Container: container, Student: 4343}
	if err := Traverse(inst, g); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	if err := SocketDir(sock, g); err != nil {
		t.Fatal(err)
	}
	if !canWrite(t, container, filepath.Join(sock, "g.json")) {
		t.Fatal("the container cannot write in its socket directory")
	}
	if canWrite(t, container, filepath.Join(inst, "other")) {
		t.Error("the container can write the instance directory")
	}
	if canWrite(t, 4444, filepath.Join(sock, "x")) {
		t.Error("a third uid can write the socket directory")
	}
	link := filepath.Join(base, "link")
	os.Symlink(sock, link)
	if SocketDir(link, g) == nil || Traverse(link, g) == nil {
		t.Error("a symlink was followed")
	}
}

// openDir is a temporary directory any uid may pass through (t.TempDir's
// parent is private).
func openDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "cardaccess")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o711)
	return d
}

func acl(t *testing.T, p string) posixacl.ACL {
	t.Helper()
	a, err := posixacl.GetPath(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDevice: a rootful container's root opens a device it is given (a
// stand-in for a board's serial port: the null device's numbers, mode
// 0600 as udev leaves a tty to root and its group).
func TestDevice(t *testing.T) {
	t.Parallel()
	needs.Root(t, "making a device node")
	dir := openDir(t)
	node := filepath.Join(dir, "ttyACM-test")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if canWrite(t, container, node) {
		t.Fatal("control: the container's uid opened the device before the grant")
	}
	if err := Device(node, Grant{Container: container}); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	if !canWrite(t, container, node) {
		t.Error("the container's uid cannot open the device it was given")
	}
	if canWrite(t, 4444, node) {
		t.Error("a third uid can open the device")
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	if err := Device(plain, Grant{Container: container}); err == nil {
		t.Error("a regular file was taken for a device")
	}
}

// TestSocket: a socket gets the entry; anything else is refused.
func TestSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := Socket(p, container); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	if a := acl(t, p); a.Effective(container) != posixacl.Read|posixacl.Write {
		t.Errorf("the socket's ACL: %+v", a)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	if err := Socket(plain, container); err == nil {
		t.Error("a regular file was taken for a socket")
	}
}
