package student

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stem-edu/stem/internal/lab"
)

// storePrefix starts the name of each test process's shared store in
// /var/tmp; its file "owner" holds the process's tag.
const storePrefix = "stemt-store-"

// store is the test process's shared image store, made on first use: the
// kind `stemctl lab` gives its accounts, root loading each image once and
// every account reading it through fuse-overlayfs. A class of students
// then costs one image load, not one per student.
var store struct {
	mu     sync.Mutex
	s      *lab.Shared
	loaded map[string]bool
}

// NewManyShared makes n accounts as NewMany does, each reading images
// from the test process's shared store instead of a copy of its own.
func NewManyShared(t testing.TB, n int, images ...string) []*Student {
	t.Helper()
	s, err := sharedStore(images)
	if err != nil {
		t.Fatalf("shared image store: %v", err)
	}
	ss := NewMany(t, n)
	for _, st := range ss {
		p := filepath.Join(st.Home, ".config", "containers", "storage.conf")
		if err := os.WriteFile(p, []byte(s.StorageConf()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.chown(p); err != nil {
			t.Fatal(err)
		}
	}
	return ss
}

// sharedStore is the process's store with every image of images in it.
func sharedStore(images []string) (*lab.Shared, error) {
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.s == nil {
		sweepStores()
		s := lab.DefaultShared
		s.UdevRule = ""
		if st := lab.EnsureFuse(&lab.Options{Shared: &s}); st.Result == lab.Failed || st.Result == lab.Skipped {
			return nil, fmt.Errorf("%s: %s", st.Name, st.Detail)
		}
		dir, err := os.MkdirTemp("/var/tmp", storePrefix)
		if err != nil {
			return nil, err
		}
		err = os.Chmod(dir, 0o755) // the accounts read the store
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "owner"), []byte(tag()), 0o644)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.Root, s.RunRoot = filepath.Join(dir, "storage"), filepath.Join(dir, "run")
		store.s, store.loaded = &s, map[string]bool{}
	}
	o := &lab.Options{Shared: store.s, CacheDir: imageCache}
	ctx := context.Background()
	for _, ref := range images {
		if store.loaded[ref] {
			continue
		}
		id, err := output(exec.CommandContext(ctx, "podman", "image", "inspect", "--format", "{{.Id}}", ref))
		if err != nil {
			return nil, fmt.Errorf("image %s (built? `make images`): %w", ref, err)
		}
		if st := lab.EnsureSharedImage(ctx, o, ref, id); st.Result == lab.Failed {
			return nil, fmt.Errorf("%s: %s", st.Name, st.Detail)
		}
		store.loaded[ref] = true
	}
	return store.s, nil
}

// removeStore deletes the process's store.
func removeStore() {
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.s != nil {
		deleteStore(filepath.Dir(store.s.Root))
		store.s = nil
	}
}

func deleteStore(dir string) {
	exec.Command("umount", filepath.Join(dir, "storage", "overlay")).Run()
	os.RemoveAll(dir)
}

// sweepStores removes the stores of test processes that are gone.
func sweepStores() {
	dirs, _ := filepath.Glob(filepath.Join("/var/tmp", storePrefix+"*"))
	for _, d := range dirs {
		if owner, err := os.ReadFile(filepath.Join(d, "owner")); err == nil && makerGone(string(owner)) {
			deleteStore(d)
		}
	}
}
