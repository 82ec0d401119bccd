package cardstate

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

// The container can swap any level of .rv or .stem for a symlink at any
// moment (the card is mounted writable). These tests do that in a tight
// loop while the host-side functions run over and over.

// raceFor is how long each swap race runs (less in the -short tier).
func raceFor() time.Duration {
	if testing.Short() {
		return 400 * time.Millisecond
	}
	return 1200 * time.Millisecond
}

// listing is every path below dir, sorted.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestCarryHistorySwapRace: .rv (or a level below it) is swapped for a
// symlink to a directory holding a host secret at the same relative path
// while Ensure carries the old history over. The secret must never be
// copied into .stem/instances/<inst>/bash_history, where the container
// reads it.
func TestCarryHistorySwapRace(t *testing.T) {
	for _, level := range []string{".rv", ".rv/instances", ".rv/instances/i"} {
		t.Run(level, func(t *testing.T) {
			card, host := t.TempDir(), t.TempDir()
			old := filepath.Join(card, ".rv", "instances", "i")
			os.MkdirAll(old, 0o755)
			os.WriteFile(filepath.Join(old, HistoryFile), []byte("make test\n"), 0o600)
			// The secret sits where the swapped level leads.
			below, _ := filepath.Rel(filepath.Join(card, level), old)
			secretDir := filepath.Join(host, below)
			os.MkdirAll(secretDir, 0o700)
			os.WriteFile(filepath.Join(secretDir, HistoryFile), []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600)
			dst := filepath.Join(Dir(card, "i"), HistoryFile)
			stop := swaptest.Swap(t, filepath.Join(card, level), host)
			var copied, none int
			for deadline := time.Now().Add(raceFor()); time.Now().Before(deadline); {
				os.Remove(dst)
				if _, err := Ensure(card, "i"); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(dst)
				switch {
				case err != nil:
					none++
				case string(got) == "make test\n":
					copied++
				default:
					stop()
					t.Fatalf("Ensure copied %q into %s: a host file reached through the swapped %s", got, dst, level)
				}
			}
			t.Logf("carried over %d times, refused %d times", copied, none)
			if copied == 0 || none == 0 {
				t.Errorf("the race did not happen (%d carried, %d refused)", copied, none)
			}
		})
	}
}

// TestWriteSwapRace: .stem (or a level below it) is swapped for a symlink
// to a host directory (with the same layout below it) while Write,
// Ensure, Prepare and its undo and Read run. Nothing may be created in,
// or removed from, the host directory, and Read must never return its
// instance.json.
func TestWriteSwapRace(t *testing.T) {
	for _, level := range []string{".stem", ".stem/instances", ".stem/instances/i"} {
		t.Run(level, func(t *testing.T) {
			card, host := t.TempDir(), t.TempDir()
			inst := Dir(card, "i")
			below, _ := filepath.Rel(filepath.Join(card, level), inst)
			hostInst := filepath.Join(host, below)
			os.MkdirAll(hostInst, 0o700)
			os.WriteFile(filepath.Join(hostInst, InstanceFile), []byte(`{"a":"SECRET"}`), 0o600)
			os.WriteFile(filepath.Join(hostInst, HistoryFile), []byte("secret\n"), 0o600)
			os.MkdirAll(filepath.Join(card, ".rv", "instances", "i"), 0o755)
			os.WriteFile(filepath.Join(card, ".rv", "instances", "i", HistoryFile), []byte("ls\n"), 0o600)
			if err := Write(card, "i", map[string]string{"a": "inside"}); err != nil {
				t.Fatal(err)
			}
			want := listing(t, host)
			stop := swaptest.Swap(t, filepath.Join(card, level), host)
			var ok, refused int
			count := func(err error) {
				if err == nil {
					ok++
				} else {
					refused++
				}
			}
			for deadline := time.Now().Add(raceFor()); time.Now().Before(deadline); {
				count(Write(card, "i", map[string]string{"a": "inside"}))
				_, err := Ensure(card, "i")
				count(err)
				_, undo, err := Prepare(card, "p")
				count(err)
				undo()
				var got map[string]string
				_, err = Read(card, "i", &got)
				count(err)
				if got["a"] == "SECRET" {
					stop()
					t.Fatalf("Read returned the host's instance.json through the swapped %s", level)
				}
				if have := listing(t, host); have != want {
					stop()
					t.Fatalf("the host directory changed through the swapped %s:\nhave %s\nwant %s", level, have, want)
				}
			}
			t.Logf("%d calls done, %d refused", ok, refused)
			if ok == 0 || refused == 0 {
				t.Errorf("the race did not happen (%d done, %d refused)", ok, refused)
			}
		})
	}
}
