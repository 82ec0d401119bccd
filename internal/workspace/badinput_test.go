package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const oneTask = "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n"

// A task's dir must be a directory inside the card: not missing (Podman
// would create it on the host), not a file, not a symlink out of the card.
// A symlink that stays inside the card is fine.
func TestResolveTaskDirMustStayInTheCard(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for _, c := range []string{"missing", "file", "out", "in"} {
		writeFiles(t, root, map[string]string{"s/" + c + "/stem.toml": oneTask + "dir = \"t\"\n"})
	}
	writeFiles(t, root, map[string]string{"s/file/t": "", "s/in/real/.keep": ""})
	if err := os.Symlink(outside, filepath.Join(root, "s", "out", "t")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "s", "in", "t")); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for card, want := range map[string]string{
		"missing": `dir "t" does not exist`,
		"file":    `dir "t" is not a directory`,
		"out":     `dir "t" leads out of the card`,
	} {
		if _, err := ws.Resolve("native-amd64", "s", card, "1", ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("card %s: err = %v, want %q", card, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "s", "missing", "t")); err == nil {
		t.Error("resolving created the missing task dir")
	}
	r, err := ws.Resolve("native-amd64", "s", "in", "1", "")
	if err != nil {
		t.Fatalf("a symlink inside the card: %v", err)
	}
	if r.TaskDir != filepath.Join(ws.Root, "s", "in", "t") {
		t.Errorf("TaskDir = %q", r.TaskDir)
	}
}

// A FIFO planted as stem.toml is refused at once instead of blocking for a
// writer; directories and devices are refused too.
func TestLoadManifestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	os.MkdirAll(fifo, 0o755)
	if err := syscall.Mkfifo(filepath.Join(fifo, ManifestName), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadManifest(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
			t.Errorf("fifo: err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LoadManifest blocked on a FIFO")
	}
	sub := filepath.Join(dir, "dir")
	os.MkdirAll(filepath.Join(sub, ManifestName), 0o755)
	if _, err := LoadManifest(sub); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Errorf("directory: err = %v", err)
	}
	dev := filepath.Join(dir, "dev")
	os.MkdirAll(dev, 0o755)
	if err := syscall.Mknod(filepath.Join(dev, ManifestName), syscall.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatalf("mknod (the tests run as root): %v", err)
	}
	if _, err := LoadManifest(dev); err == nil || !strings.Contains(err.Error(), "not a regular file (a device)") {
		t.Errorf("device: err = %v", err)
	}
	// A link, to a device or to a host file with a valid manifest in it:
	// the card is writable from the container, so neither is read.
	outside := filepath.Join(t.TempDir(), "host-secret.toml")
	os.WriteFile(outside, []byte(oneTask), 0o600)
	for target, name := range map[string]string{"/dev/zero": "devlink", outside: "filelink"} {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.Symlink(target, filepath.Join(d, ManifestName))
		if _, err := LoadManifest(d); err == nil || !strings.Contains(err.Error(), "is a symlink") {
			t.Errorf("%s -> %s: err = %v", name, target, err)
		}
	}
}

// A card or series that is a symlink is not listed; naming it says why.
func TestCardPathExplainsSymlinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	writeFiles(t, root, map[string]string{"s/real/stem.toml": oneTask})
	writeFiles(t, outside, map[string]string{"card/stem.toml": oneTask})
	os.Symlink(filepath.Join(outside, "card"), filepath.Join(root, "s", "linked"))
	os.Symlink(outside, filepath.Join(root, "other"))
	ws, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.CardPath("s", "linked"); err == nil || !strings.Contains(err.Error(), "card s/linked is a symlink") {
		t.Errorf("symlinked card: err = %v", err)
	}
	if _, err := ws.CardPath("other", "card"); err == nil || !strings.Contains(err.Error(), "series other is a symlink") {
		t.Errorf("symlinked series: err = %v", err)
	}
	// A name that is not a valid card name is never looked up on disk.
	if _, err := ws.CardPath("s", "../s/linked"); err == nil || !strings.Contains(err.Error(), "unknown card") {
		t.Errorf("path as a name: err = %v", err)
	}
}

// A very long bad name is cut in the message, on a rune boundary.
func TestNotFoundErrorCutsLongNames(t *testing.T) {
	msg := (&NotFoundError{Kind: "card", Name: strings.Repeat("ż", 1000), Candidates: []string{"hello"}}).Error()
	if len(msg) > 200 || !strings.Contains(msg, "(2000 bytes)") || strings.Contains(msg, `\x`) {
		t.Errorf("message (%d bytes): %s", len(msg), msg)
	}
}

func TestOpenExplainsLoopsAndFiles(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	os.Symlink(loop+"2", loop)
	os.Symlink(loop, loop+"2")
	if _, err := Open(loop); err == nil || !strings.Contains(err.Error(), "symlink loop") || strings.Contains(err.Error(), "EvalSymlinks") {
		t.Errorf("loop: err = %v", err)
	}
	writeFiles(t, dir, map[string]string{"file": ""})
	if _, err := Open(filepath.Join(dir, "file", "ws")); err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), "STEM_WORKSPACE") {
		t.Errorf("file in the path: err = %v", err)
	}
}
