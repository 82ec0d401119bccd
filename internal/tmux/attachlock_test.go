package tmux

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

// TestAttachLockSwapRace: the container swaps the socket's directory for
// a symlink to a host directory while host-side clients take the attach
// lock beside t.sock. The lock file must never be created in the host
// directory.
func TestAttachLockSwapRace(t *testing.T) {
	base, host := t.TempDir(), t.TempDir()
	dir := filepath.Join(base, "0123456789ab")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "t.sock")
	stop := swaptest.Swap(t, dir, host)
	ctx := context.Background()
	var locked int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		unlock, err := lockAttach(ctx, socket)
		if err != nil {
			t.Fatal(err)
		}
		unlock()
		if ents, _ := os.ReadDir(host); len(ents) != 0 {
			stop()
			t.Fatalf("the lock file was created in the host directory: %v", ents)
		}
		locked++
	}
	stop()
	if _, err := os.Lstat(socket + ".lock"); err != nil {
		t.Errorf("no lock file in the socket directory after %d locks: %v", locked, err)
	}
}
