package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

func TestMkdirAll(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		made, err := MkdirAll(root, "a/x/y", 0o755)
		if err != nil || strings.Join(made, ",") != "a/x,a/x/y" {
			t.Fatalf("made %v, %v", made, err)
		}
		if fi, err := os.Lstat(filepath.Join(root, "a", "x", "y")); err != nil || !fi.IsDir() {
			t.Fatalf("not made: %v", err)
		}
		if made, err := MkdirAll(root, "a/x/y", 0o755); err != nil || len(made) != 0 {
			t.Errorf("existing: made %v, %v", made, err)
		}
		os.Symlink(outside, filepath.Join(root, "out"))
		os.Symlink(filepath.Join(outside, "b"), filepath.Join(root, "a", "x", "last"))
		for _, rel := range []string{"out/new", "out", "a/x/last", "a/x/last/new"} {
			if made, err := MkdirAll(root, rel, 0o755); !errors.Is(err, ErrSymlink) || len(made) != 0 {
				t.Errorf("%s: made %v, %v, want ErrSymlink", rel, made, err)
			}
		}
		if _, err := MkdirAll(root, "top.txt/new", 0o755); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("through a file: %v, want ENOTDIR", err)
		}
		for _, rel := range []string{"", "/abs", "a/../x", "a//x", "./a"} {
			if _, err := MkdirAll(root, rel, 0o755); !errors.Is(err, ErrPath) {
				t.Errorf("%q: %v, want ErrPath", rel, err)
			}
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 2 {
			t.Errorf("something appeared outside: %v", ents)
		}
		if err := Mkdir(root, "a/x/z", 0o700); err != nil {
			t.Fatal(err)
		}
		if err := Mkdir(root, "a/x/z", 0o700); !errors.Is(err, os.ErrExist) {
			t.Errorf("Mkdir of an existing name: %v", err)
		}
		if err := Mkdir(root, "out/new", 0o700); !errors.Is(err, ErrSymlink) {
			t.Errorf("Mkdir through a symlink: %v", err)
		}
	})
}

func TestWriteFileAtomic(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		if err := WriteFileAtomic(root, "a/b/new.txt", []byte("one"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(root, "top.txt", []byte("two"), 0o600); err != nil {
			t.Fatal(err)
		}
		for rel, want := range map[string]string{"a/b/new.txt": "one", "top.txt": "two"} {
			if got, err := read(root, rel); err != nil || got != want {
				t.Errorf("%s: %q %v", rel, got, err)
			}
		}
		if fi, _ := os.Stat(filepath.Join(root, "a", "b", "new.txt")); fi == nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("mode: %v", fi)
		}
		// A symlink at the name is replaced, not followed.
		leak := filepath.Join(root, "a", "leak.txt")
		os.Symlink(filepath.Join(outside, "secret.txt"), leak)
		if err := WriteFileAtomic(root, "a/leak.txt", []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Lstat(leak); fi == nil || !fi.Mode().IsRegular() {
			t.Errorf("the symlink was not replaced: %v", fi)
		}
		os.Symlink(outside, filepath.Join(root, "out"))
		if err := WriteFileAtomic(root, "out/secret.txt", []byte("x"), 0o600); !errors.Is(err, ErrSymlink) {
			t.Errorf("through a symlinked directory: %v", err)
		}
		if err := WriteFileAtomic(root, "a/../x", nil, 0o600); !errors.Is(err, ErrPath) {
			t.Errorf("..: %v", err)
		}
		if got, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(got) != "SECRET\n" {
			t.Errorf("the file outside changed: %q", got)
		}
		if ents, _ := os.ReadDir(filepath.Join(root, "a", "b")); len(ents) != 2 {
			t.Errorf("temporary files left: %v", ents)
		}
		// A directory at the name: the write fails and leaves no temporary.
		if err := WriteFileAtomic(root, "a/b", []byte("x"), 0o600); err == nil {
			t.Error("replaced a directory")
		}
		if ents, _ := os.ReadDir(filepath.Join(root, "a")); len(ents) != 2 {
			t.Errorf("temporary files left: %v", ents)
		}
	})
}

func TestRemoveAndLstat(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		os.Symlink(outside, filepath.Join(root, "out"))
		os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "a", "leak.txt"))
		if fi, err := Lstat(root, "a/leak.txt"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("Lstat of a symlink: %v %v", fi, err)
		}
		if fi, err := Lstat(root, "a/b/f.txt"); err != nil || !fi.Mode().IsRegular() || fi.Size() != 7 {
			t.Errorf("Lstat: %v %v", fi, err)
		}
		if _, err := Lstat(root, "out/secret.txt"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Lstat through a symlink: %v", err)
		}
		if err := Remove(root, "out/secret.txt"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Remove through a symlink: %v", err)
		}
		if err := Remove(root, "a/leak.txt"); err != nil {
			t.Errorf("Remove of a symlink: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "secret.txt")); err != nil {
			t.Errorf("the file outside went: %v", err)
		}
		if err := Remove(root, "a/b"); err == nil {
			t.Error("Remove took a directory")
		}
		if err := RemoveDir(root, "a/b"); !errors.Is(err, syscall.ENOTEMPTY) {
			t.Errorf("RemoveDir of a full directory: %v", err)
		}
		if err := Remove(root, "a/b/f.txt"); err != nil {
			t.Fatal(err)
		}
		if err := RemoveDir(root, "a/b"); err != nil {
			t.Fatal(err)
		}
		if err := RemoveDir(root, "out/b"); !errors.Is(err, ErrSymlink) {
			t.Errorf("RemoveDir through a symlink: %v", err)
		}
		if err := Remove(root, "a/missing"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}
	})
}

// TestWriteSwapRace: while a directory of the root is swapped for a
// symlink to a directory outside, MkdirAll, Mkdir, WriteFileAtomic,
// Remove and Lstat run over and over through it. Nothing may appear in or
// disappear from the directory outside, and Lstat may never describe its
// file. The control (the same calls by path) shows the swap does send
// path-based writes outside.
func TestWriteSwapRace(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		dir := filepath.Join(root, "a", "b")
		out := filepath.Join(outside, "b")
		write(t, filepath.Join(out, "victim"), "keep\n")
		secret, err := os.Stat(filepath.Join(out, "f.txt"))
		if err != nil {
			t.Fatal(err)
		}
		outsideHas := func() []string {
			ents, _ := os.ReadDir(out)
			var names []string
			for _, e := range ents {
				if !strings.HasPrefix(e.Name(), "ctl") {
					names = append(names, e.Name())
				}
			}
			return names
		}
		stop := swaptest.Swap(t, dir, out)
		var ok, refused, control int
		deadline := time.Now().Add(swapFor())
		for i := 0; time.Now().Before(deadline); i++ {
			errs := []error{}
			_, err := MkdirAll(root, "a/b/new/deeper", 0o755)
			errs = append(errs, err)
			errs = append(errs, Mkdir(root, "a/b/made", 0o755))
			errs = append(errs, WriteFileAtomic(root, "a/b/w.txt", []byte("inside"), 0o600))
			errs = append(errs, WriteFileAtomic(root, "a/b/victim", []byte("inside"), 0o600))
			errs = append(errs, Remove(root, "a/b/victim"))
			errs = append(errs, RemoveDir(root, "a/b/made"))
			if f, err := OpenOrCreate(root, "a/b/lock", 0o600); err == nil {
				f.Close()
			} else {
				errs = append(errs, err)
			}
			fi, err := Lstat(root, "a/b/f.txt")
			errs = append(errs, err)
			if err == nil && os.SameFile(fi, secret) {
				stop()
				t.Fatal("Lstat described the file outside the root")
			}
			for _, err := range errs {
				if err == nil {
					ok++
				} else {
					refused++
				}
			}
			if names := outsideHas(); len(names) != 2 || names[0] != "f.txt" || names[1] != "victim" {
				stop()
				t.Fatalf("after %d rounds the directory outside holds %v, want [f.txt victim]", i, names)
			}
			// Control: by path.
			os.Mkdir(filepath.Join(dir, "ctl"), 0o755)
			os.WriteFile(filepath.Join(dir, "ctl.txt"), nil, 0o600)
			if ents, _ := os.ReadDir(out); len(ents) > 2 {
				control++
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), "ctl") {
						os.Remove(filepath.Join(out, e.Name()))
					}
				}
			}
		}
		stop()
		t.Logf("%d calls done, %d refused; path-based control wrote outside %d times", ok, refused, control)
		if ok == 0 || refused == 0 {
			t.Errorf("the race did not happen (%d done, %d refused): the test proves nothing", ok, refused)
		}
		if control == 0 {
			t.Error("control: path-based writes never landed outside, so the swap did not work")
		}
		if got, _ := os.ReadFile(filepath.Join(out, "victim")); string(got) != "keep\n" {
			t.Errorf("the file outside changed: %q", got)
		}
	})
}

func TestOpenOrCreate(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside := tree(t)
		f, err := OpenOrCreate(root, "a/lock", 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("held")
		f.Close()
		if f, err = OpenOrCreate(root, "a/lock", 0o600); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, _ := read(root, "a/lock"); got != "held" {
			t.Errorf("reopening truncated: %q", got)
		}
		os.Symlink(outside, filepath.Join(root, "out"))
		os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "a", "leak"))
		for _, rel := range []string{"out/lock", "a/leak"} {
			if _, err := OpenOrCreate(root, rel, 0o600); !errors.Is(err, ErrSymlink) {
				t.Errorf("%s: %v, want ErrSymlink", rel, err)
			}
		}
		syscall.Mkfifo(filepath.Join(root, "a", "fifo"), 0o600)
		done := make(chan error, 1)
		go func() { _, err := OpenOrCreate(root, "a/fifo", 0o600); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("FIFO: %v, want ErrNotRegular", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a FIFO blocks")
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 2 {
			t.Errorf("something appeared outside: %v", ents)
		}
	})
}
