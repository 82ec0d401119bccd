package instance

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

// TestGitMountSwapRace: something swaps the card's .git for a symlink to a
// host directory while stem decides what to mount. The host directory
// must never be taken for the card's .git (its identity is what the
// record keeps and what the container's mount is checked against).
func TestGitMountSwapRace(t *testing.T) {
	card, host := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(card, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(host, "x", ".git"), 0o755)
	hostID, err := cardgit.Inspect(filepath.Join(host, "x"))
	if err != nil {
		t.Fatal(err)
	}
	stop := swaptest.Swap(t, filepath.Join(card, ".git"), filepath.Join(host, "x", ".git"))
	var took, refused int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		_, merr := gitMount(card)
		id, perr := cardgit.Prepare(card)
		if merr != nil || perr != nil {
			refused++
			continue
		}
		if id.Same(hostID) {
			stop()
			t.Fatal("the host directory .git was swapped for was taken for the card's .git")
		}
		took++
	}
	stop()
	t.Logf("%d taken, %d refused", took, refused)
	if took == 0 || refused == 0 {
		t.Error("the swap never or always won: the test proves nothing")
	}
}
