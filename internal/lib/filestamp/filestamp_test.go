package filestamp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// settle waits until the kernel's file clock has moved past path's ctime,
// so that a write now leaves a later one.
func settle(t *testing.T, path string) {
	t.Helper()
	s, ok := Lstat(path)
	if !ok {
		t.Fatalf("%s: no stamp", path)
	}
	probe := filepath.Join(t.TempDir(), "probe")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if p, _ := Lstat(probe); p.Ctime > s.Ctime {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the file clock did not move")
		}
	}
}

func TestARewriteWithTheSameSizeAndMtimeChangesTheStamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stem.toml")
	if err := os.WriteFile(path, []byte(`max_level = "assist"`), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := Lstat(path)
	var old syscall.Stat_t
	syscall.Stat(path, &old)
	settle(t, path)
	// In place (same inode), same size, mtime set back as touch -d would.
	if err := os.WriteFile(path, []byte(`max_level = "none"  `), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(0, old.Mtim.Nano())
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	after, ok := Lstat(path)
	if !ok {
		t.Fatal("no stamp after the rewrite")
	}
	// The control: inode, size and mtime say nothing changed.
	if after.Ino != before.Ino || after.Size != before.Size || after.Mtime != before.Mtime {
		t.Fatalf("control: the rewrite changed inode, size or mtime: %+v then %+v", before, after)
	}
	if after == before {
		t.Fatalf("the stamp did not change across a rewrite: %+v", after)
	}
}

func TestAReplacementChangesTheStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "consent.json")
	os.WriteFile(path, []byte("{}"), 0o600)
	before, _ := Lstat(path)
	tmp := filepath.Join(dir, "new")
	os.WriteFile(tmp, []byte("{}"), 0o600)
	os.Chtimes(tmp, time.Unix(0, before.Mtime), time.Unix(0, before.Mtime))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if after, _ := Lstat(path); after == before {
		t.Fatalf("a file replaced by rename has the same stamp %+v", after)
	}
}

func TestOnlyRegularFilesHaveStamps(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, ok := Lstat(link); ok {
		t.Fatal("a symlink has a stamp (its target could change under it)")
	}
	if _, ok := Lstat(dir); ok {
		t.Fatal("a directory has a stamp")
	}
	if _, ok := Lstat(filepath.Join(dir, "missing")); ok {
		t.Fatal("a missing file has a stamp")
	}
	fi, _ := os.Lstat(link)
	if _, ok := Of(fi); ok {
		t.Fatal("Of gives a symlink a stamp")
	}
	fi, _ = os.Stat(target)
	if _, ok := Of(fi); !ok {
		t.Fatal("Of gives a regular file no stamp")
	}
}

func TestAFreshStampIsNotSettled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	read := time.Now()
	os.WriteFile(path, []byte("x"), 0o600)
	s, _ := Lstat(path)
	if s.Settled(read) {
		t.Fatalf("a file written after its read began is settled: ctime %d, read %d", s.Ctime, read.UnixNano())
	}
	if s.Settled(time.Unix(0, s.Ctime).Add(fineGrain / 2)) {
		t.Fatal("a stamp within a grain of its read is settled")
	}
	if !s.Settled(time.Unix(0, s.Ctime).Add(coarseGrain + time.Second)) {
		t.Fatal("a stamp long before its read is not settled")
	}
	whole := Stamp{Ino: 1, Ctime: 1_700_000_000 * int64(time.Second)}
	if whole.Settled(time.Unix(0, whole.Ctime).Add(time.Second)) {
		t.Fatal("a stamp of whole seconds is settled a second later (the file system may keep only seconds)")
	}
	if (Stamp{}).Settled(time.Now()) {
		t.Fatal("the zero stamp is settled")
	}
}
