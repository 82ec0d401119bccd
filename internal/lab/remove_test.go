package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// RemoveOwned removes the removed account's directories and nothing that
// merely bears their name: a link planted there is not followed, another
// owner's directory stays.
func TestRemoveOwned(t *testing.T) {
	dir := t.TempDir()
	me := os.Getuid()
	own := filepath.Join(dir, "podman-run-own")
	os.MkdirAll(filepath.Join(own, "containers"), 0o700)
	canary := filepath.Join(dir, "elsewhere", "canary")
	os.MkdirAll(filepath.Dir(canary), 0o700)
	os.WriteFile(canary, []byte("x"), 0o600)
	link := filepath.Join(dir, "containers-user-link")
	if err := os.Symlink(filepath.Dir(canary), link); err != nil {
		t.Fatal(err)
	}
	if err := RemoveOwned(me, own, link, filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(own); !os.IsNotExist(err) {
		t.Errorf("the account's own directory is still there: %v", err)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the link was followed: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("the link itself was removed: %v", err)
	}
	// Another owner's directory stays; the control: the same call with
	// its owner's uid removes it.
	other := filepath.Join(dir, "containers-user-other")
	os.Mkdir(other, 0o700)
	RemoveOwned(me+1, other)
	if _, err := os.Lstat(other); err != nil {
		t.Fatalf("a directory of another uid was removed: %v", err)
	}
	RemoveOwned(me, other)
	if _, err := os.Lstat(other); !os.IsNotExist(err) {
		t.Fatalf("the control: its owner's uid did not remove it: %v", err)
	}
}

func TestPodmanTempDirs(t *testing.T) {
	want := map[string]bool{"/tmp/containers-user-1234": true, "/tmp/podman-run-1234": true,
		"/var/tmp/containers-user-1234": true, "/var/tmp/podman-run-1234": true}
	got := PodmanTempDirs(1234)
	for _, d := range got {
		delete(want, d)
	}
	if len(want) != 0 || len(got) != 4 {
		t.Fatalf("%v, missing %v", got, want)
	}
}
