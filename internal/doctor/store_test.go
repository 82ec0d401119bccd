package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/idmap"
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

// TestImageIDs: a rootless account whose own store keeps images as its
// containers' ids passes; without storage.conf, with the plain overlay
// one, or with another mapping it warns with the file to write; the
// shared store needs no remapping.
func TestImageIDs(t *testing.T) {
	e, _ := fakeEnv(t)
	e.StorageConf = filepath.Join(t.TempDir(), "storage.conf")
	m, err := idmap.Rootless(e.SubIDs, e.User, strconv.Itoa(e.UID))
	if err != nil {
		t.Fatal(err)
	}
	conf := OwnStorageConf(m)
	if !strings.Contains(conf, `remap-uids = "0:1:65536"`) || !strings.Contains(conf, `remap-gids = "0:1:65536"`) {
		t.Fatalf("OwnStorageConf:\n%s", conf)
	}
	for _, bad := range []string{"", "[storage]\ndriver = \"overlay\"\n", strings.ReplaceAll(conf, "0:1:65536", "0:1:1000")} {
		if bad != "" {
			writeFile(t, e.StorageConf, bad)
		}
		r := checkImageIDs(e)
		if r.Status != Warn || r.Required || !strings.Contains(r.Fix, "remap-uids") || !strings.Contains(r.Fix, e.StorageConf) {
			t.Errorf("storage.conf %q: %+v", bad, r)
		}
	}
	writeFile(t, e.StorageConf, conf)
	if r := checkImageIDs(e); r.Status != OK {
		t.Errorf("stem's own storage.conf: %+v", r)
	}
	if r := find(t, Run(t.Context(), e), "image-ids"); r.Status != OK {
		t.Errorf("Run: %+v", r)
	}
	writeFile(t, e.StorageConf, sharedConf("/var/lib/stem-shared/storage", "/usr/bin/fuse-overlayfs"))
	if r := checkImageIDs(e); r.Status != OK || !strings.Contains(r.Detail, "shared") {
		t.Errorf("shared store: %+v", r)
	}
}

// TestImageIDsFix: the fix's command, run by a shell, writes exactly
// OwnStorageConf.
func TestImageIDsFix(t *testing.T) {
	e, _ := fakeEnv(t)
	e.StorageConf = filepath.Join(t.TempDir(), "storage.conf")
	r := checkImageIDs(e)
	cmd, _, _ := strings.Cut(r.Fix, "   (")
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", cmd, err, out)
	}
	m, _ := idmap.Rootless(e.SubIDs, e.User, strconv.Itoa(e.UID))
	if got, _ := os.ReadFile(e.StorageConf); string(got) != OwnStorageConf(m) {
		t.Fatalf("the fix wrote\n%s\nwant\n%s", got, OwnStorageConf(m))
	}
	if r := checkImageIDs(e); r.Status != OK {
		t.Errorf("after the fix: %+v", r)
	}
}
