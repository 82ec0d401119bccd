package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedConf is an account's storage.conf reading store with mp.
func sharedConf(store, mp string) string {
	return "[storage]\ndriver = \"overlay\"\n\n[storage.options]\nadditionalimagestores = [\"" + store +
		"\"]\n\n[storage.options.overlay]\nmount_program = \"" + mp + "\"\n"
}

// TestSharedStore: an account without a shared store passes; one with a
// readable store, fuse-overlayfs and a FUSE device it can open passes;
// each missing piece fails the required check with its fix.
func TestSharedStore(t *testing.T) {
	e, _ := fakeEnv(t)
	dir := t.TempDir()
	e.StorageConf = filepath.Join(dir, "storage.conf")
	e.Fuse = filepath.Join(dir, "fuse")
	store := filepath.Join(dir, "store")
	mp := filepath.Join(dir, "fuse-overlayfs")
	writeFile(t, filepath.Join(store, "overlay-images", "images.json"), "[]")
	writeFile(t, mp, "#!/bin/sh\n")
	os.Chmod(mp, 0o755)
	writeFile(t, e.Fuse, "")

	if r := checkSharedStore(e); r.Status != OK || r.Required || !strings.HasPrefix(r.Detail, "none") {
		t.Fatalf("no storage.conf: %+v", r)
	}
	writeFile(t, e.StorageConf, "[storage]\ndriver = \"overlay\"\n")
	if r := checkSharedStore(e); r.Status != OK || r.Required {
		t.Fatalf("own store: %+v", r)
	}
	writeFile(t, e.StorageConf, sharedConf(store, mp))
	if r := checkSharedStore(e); r.Status != OK || !r.Required || !strings.Contains(r.Detail, store) {
		t.Fatalf("shared store: %+v", r)
	}
	if r := find(t, Run(t.Context(), e), "shared-store"); r.Status != OK {
		t.Fatalf("Run: %+v", r)
	}

	broken := []struct {
		name   string
		mutate func()
		fix    string
	}{
		{"fuse missing", func() { os.Remove(e.Fuse) }, "chmod 0666 " + e.Fuse},
		{"no mount program", func() { writeFile(t, e.StorageConf, sharedConf(store, "")) }, "stemctl lab update stu"},
		{"mount program missing", func() { writeFile(t, e.StorageConf, sharedConf(store, mp+"-gone")) }, "apt-get install fuse-overlayfs"},
		{"store unreadable", func() { writeFile(t, e.StorageConf, sharedConf(store+"-gone", mp)) }, "stemctl lab init"},
	}
	for _, b := range broken {
		writeFile(t, e.StorageConf, sharedConf(store, mp))
		writeFile(t, e.Fuse, "")
		b.mutate()
		r := checkSharedStore(e)
		if r.Status != Fail || !r.Required || !strings.Contains(r.Fix, b.fix) {
			t.Errorf("%s: %+v", b.name, r)
		}
	}
}
