package instance

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/beneath"
	"github.com/stem-edu/stem/internal/beneath/swaptest"
)

// TestGitProtectionSwapRace: a running container (the one `up` is
// re-creating) swaps the card's .git for a symlink to a host directory
// while gitProtection makes the missing .git/hooks. The directory must
// never be made on the host.
func TestGitProtectionSwapRace(t *testing.T) {
	card, host := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(card, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := swaptest.Swap(t, filepath.Join(card, ".git"), host)
	var made, refused int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		if _, err := gitProtection(card); err == nil {
			made++
		} else {
			refused++
		}
		if _, err := os.Lstat(filepath.Join(host, "hooks")); err == nil {
			stop()
			t.Fatal("gitProtection made hooks in the host directory .git was swapped for")
		}
		beneath.RemoveDir(card, ".git/hooks") // missing again, wherever .git is now
	}
	stop()
	t.Logf("%d made, %d refused", made, refused)
	if made == 0 {
		t.Error("gitProtection never succeeded: the test proves nothing")
	}
}
