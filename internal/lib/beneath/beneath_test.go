package beneath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// modes runs f with openat2 and with the fallback walk.
func modes(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			forceWalk = walk
			defer func() { forceWalk = false }()
			f(t)
		})
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree makes root/{a/b/f.txt, top.txt} and, beside root, outside/secret.txt.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	write(t, filepath.Join(root, "a", "b", "f.txt"), "inside\n")
	write(t, filepath.Join(root, "top.txt"), "top\n")
	write(t, filepath.Join(outside, "secret.txt"), "SECRET\n")
	write(t, filepath.Join(outside, "b", "f.txt"), "SECRET\n")
	return root, outside
}

func read(root, rel string) (string, error) {
	data, err := ReadFile(root, rel, 1<<20)
	return string(data), err
}

func TestOpenInside(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, _ := tree(t)
		for rel, want := range map[string]string{"a/b/f.txt": "inside\n", "top.txt": "top\n"} {
			if got, err := read(root, rel); err != nil || got != want {
				t.Errorf("%s: %q %v", rel, got, err)
			}
		}
		// The root itself may be reached through a symlink.
		link := filepath.Join(t.TempDir(), "rootlink")
		if err := os.Symlink(root, link); err != nil {
			t.Fatal(err)
		}
		if got, err := read(link, "a/b/f.txt"); err != nil || got != "inside\n" {
			t.Errorf("through a symlinked root: %q %v", got, err)
		}
		if _, err := read(root, "a/missing.txt"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing file: %v, want ErrNotExist", err)
		}
		if _, err := read(root, "top.txt/x"); err == nil {
			t.Error("a file used as a directory was opened")
		}
	})
}

func TestOpenRefusesSymlinks(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.Symlink(outside, filepath.Join(root, "out")))                                   // middle, out of the root
		must(os.Symlink("b", filepath.Join(root, "a", "inb")))                                  // middle, inside the root
		must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "leak.txt"))) // last, out
		must(os.Symlink("top.txt", filepath.Join(root, "alias.txt")))                           // last, inside
		must(os.Symlink("/proc/self/root", filepath.Join(root, "proc")))
		for _, rel := range []string{"out/secret.txt", "out/b/f.txt", "a/inb/f.txt", "leak.txt", "alias.txt", "proc/etc/passwd"} {
			got, err := read(root, rel)
			if err == nil {
				t.Errorf("%s: read %q through a symlink", rel, got)
				continue
			}
			if !errors.Is(err, ErrSymlink) {
				t.Errorf("%s: %v, want ErrSymlink", rel, err)
			}
		}
	})
}

func TestOpenRefusesPaths(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		abs := filepath.Join(outside, "secret.txt")
		for _, rel := range []string{"", "/etc/passwd", abs, "../outside/secret.txt", "a/../../outside/secret.txt",
			"a/..", "a/../top.txt", "./top.txt", "a//b/f.txt", "a/b/f.txt/", ".", "..", "nul\x00byte"} {
			if got, err := read(root, rel); err == nil || !errors.Is(err, ErrPath) {
				t.Errorf("%q: %q %v, want ErrPath", rel, got, err)
			}
		}
	})
}

// Magic links (/proc/self/root, /proc/self/fd/N) jump anywhere without
// being ordinary symlinks.
func TestOpenRefusesMagicLinks(t *testing.T) {
	modes(t, func(t *testing.T) {
		_, outside := tree(t)
		f, err := os.Open(filepath.Join(outside, "secret.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cases := []struct{ root, rel string }{
			{"/proc/self", "root/etc/passwd"},
			{"/proc/self", "root" + filepath.Join(outside, "secret.txt")},
			{"/proc/self", fmt.Sprintf("fd/%d", f.Fd())},
			{"/proc/self/fd", fmt.Sprint(f.Fd())},
			{"/proc/self", "cwd/" + "x"},
		}
		for _, c := range cases {
			if got, err := read(c.root, c.rel); err == nil {
				t.Errorf("%s %s: read %q through a magic link", c.root, c.rel, got)
			}
		}
		// Control: the magic link does lead to the file.
		if data, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err != nil || string(data) != "SECRET\n" {
			t.Fatalf("control: /proc/self/fd/N: %q %v", data, err)
		}
	})
}

func TestOpenSpecialFiles(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, _ := tree(t)
		fifo := filepath.Join(root, "a", "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Open(root, "a/fifo"); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("FIFO: %v, want ErrNotRegular", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("opening a FIFO blocks")
		}
		if _, err := Open(root, "a/b"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("directory: %v, want ErrNotRegular", err)
		}
		if _, err := Open("/dev", "null"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("device: %v, want ErrNotRegular", err)
		}
	})
}

func TestReadFileLimit(t *testing.T) {
	root, _ := tree(t)
	write(t, filepath.Join(root, "big"), strings.Repeat("x", 100))
	if data, err := ReadFile(root, "big", 100); err != nil || len(data) != 100 {
		t.Errorf("at the limit: %d bytes, %v", len(data), err)
	}
	if _, err := ReadFile(root, "big", 99); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
}

// TestSwapRace: code in the container swaps a directory of the card for a
// symlink to a directory outside (holding a secret at the same relative
// path) as fast as it can, while the host reads. No read may ever return
// the secret. The control shows that resolving and then opening with only
// the last component unfollowed does leak.
func TestSwapRace(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		dir := filepath.Join(root, "a", "b")
		link := filepath.Join(root, "a", "b.link")
		if err := os.Symlink(filepath.Join(outside, "b"), link); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Swap b between the directory and the symlink: RENAME_EXCHANGE
			// keeps both names present at every moment.
			for !stop.Load() {
				if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("swap: %v", err)
					return
				}
			}
		}()
		deadline := time.Now().Add(swapFor())
		var ok, refused, leakedControl int
		for time.Now().Before(deadline) {
			got, err := read(root, "a/b/f.txt")
			switch {
			case err == nil && got == "inside\n":
				ok++
			case err == nil:
				stop.Store(true)
				wg.Wait()
				t.Fatalf("read returned %q: the secret from outside the root", got)
			default:
				refused++
			}
			// Control: the old way (O_NOFOLLOW on the last component).
			if f, err := os.OpenFile(filepath.Join(root, "a", "b", "f.txt"), os.O_RDONLY|syscall.O_NOFOLLOW, 0); err == nil {
				data, _ := io.ReadAll(f)
				f.Close()
				if string(data) == "SECRET\n" {
					leakedControl++
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		t.Logf("reads: %d inside, %d refused; control leaked %d times", ok, refused, leakedControl)
		if ok == 0 || refused == 0 {
			t.Errorf("the race did not happen (%d inside, %d refused): the test proves nothing", ok, refused)
		}
		if leakedControl == 0 {
			t.Errorf("control: a plain O_NOFOLLOW open never read the secret, so the swap did not work")
		}
	})
}

// swapFor is how long a swap race runs (less in the -short tier).
func swapFor() time.Duration {
	if testing.Short() {
		return 500 * time.Millisecond
	}
	return 1500 * time.Millisecond
}
