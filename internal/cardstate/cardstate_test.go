package cardstate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteReadAndFallback(t *testing.T) {
	card := t.TempDir()
	if err := Write(card, "i1", map[string]string{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	dir, err := Read(card, "i1", &got)
	if err != nil || got["a"] != "b" || dir != Dir(card, "i1") {
		t.Fatalf("%v %v %s", got, err, dir)
	}
	// Older layout under .rv is read when .stem has nothing.
	old := filepath.Join(card, ".rv", "instances", "i2")
	os.MkdirAll(old, 0o755)
	os.WriteFile(filepath.Join(old, InstanceFile), []byte(`{"a":"rv"}`), 0o644)
	dir, err = Read(card, "i2", &got)
	if err != nil || got["a"] != "rv" || dir != old {
		t.Fatalf("fallback: %v %v %s", got, err, dir)
	}
	if _, err := Read(card, "none", &got); err == nil {
		t.Fatal("missing state read without error")
	}
}

func TestHostileCardSymlinks(t *testing.T) {
	for _, level := range []string{".stem", ".stem/instances", ".stem/instances/i"} {
		t.Run(level, func(t *testing.T) {
			card, victim := t.TempDir(), t.TempDir()
			parent := filepath.Join(card, filepath.Dir(level))
			os.MkdirAll(parent, 0o755)
			if err := os.Symlink(victim, filepath.Join(card, level)); err != nil {
				t.Fatal(err)
			}
			err := Write(card, "i", map[string]int{"x": 1})
			if err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("wrote through a symlinked %s: %v", level, err)
			}
			if ents, _ := os.ReadDir(victim); len(ents) != 0 {
				t.Fatalf("files appeared behind the symlink: %v", ents)
			}
		})
	}
	// A symlinked instance.json is not read.
	card, victim := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(victim, "secret"), []byte(`{"a":"secret"}`), 0o600)
	d := Dir(card, "i")
	os.MkdirAll(d, 0o755)
	os.Symlink(filepath.Join(victim, "secret"), filepath.Join(d, InstanceFile))
	var got map[string]string
	if _, err := Read(card, "i", &got); err == nil {
		t.Fatal("read through a symlinked instance.json")
	}
}

func TestHistoryCarriedOverFromRv(t *testing.T) {
	card := t.TempDir()
	old := filepath.Join(card, ".rv", "instances", "i1")
	os.MkdirAll(old, 0o755)
	os.WriteFile(filepath.Join(old, HistoryFile), []byte("make test\n"), 0o600)
	dir, err := Ensure(card, "i1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, HistoryFile)); err != nil || string(b) != "make test\n" {
		t.Fatalf("history not carried over: %q %v", b, err)
	}
	// .stem's own history is never replaced.
	os.WriteFile(filepath.Join(dir, HistoryFile), []byte("newer\n"), 0o600)
	os.WriteFile(filepath.Join(old, HistoryFile), []byte("older\n"), 0o600)
	Ensure(card, "i1")
	if b, _ := os.ReadFile(filepath.Join(dir, HistoryFile)); string(b) != "newer\n" {
		t.Fatalf("existing history replaced: %q", b)
	}
	// A symlinked .rv (or history file) is not followed.
	secret := filepath.Join(t.TempDir(), HistoryFile) // what a followed link would copy
	os.WriteFile(secret, []byte("host secret\n"), 0o600)
	for _, name := range []string{"i2", "i3"} {
		switch name {
		case "i2":
			os.MkdirAll(filepath.Join(card, ".rv", "instances"), 0o755)
			os.Symlink(filepath.Dir(secret), filepath.Join(card, ".rv", "instances", name))
		case "i3":
			d := filepath.Join(card, ".rv", "instances", name)
			os.MkdirAll(d, 0o755)
			os.Symlink(secret, filepath.Join(d, HistoryFile))
		}
		dir, err := Ensure(card, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, HistoryFile)); err == nil {
			t.Fatalf("%s: history copied through a symlink", name)
		}
	}
}

// A FIFO planted as instance.json or as the old history file must not
// block stemctl (opening a FIFO for reading waits for a writer).
func TestPlantedFIFOsDoNotBlock(t *testing.T) {
	card := t.TempDir()
	d := Dir(card, "i")
	old := filepath.Join(card, fallback, "instances", "i")
	for _, p := range []string{d, old} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(d, InstanceFile), filepath.Join(old, HistoryFile)} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 2)
	go func() {
		var v map[string]any
		_, err := Read(card, "i", &v)
		done <- err
	}()
	go func() { done <- carryHistory(card, "i") }()
	for i := 0; i < 2; i++ {
		select {
		case <-done: // refusing (Read) or carrying nothing (history) are both fine
		case <-time.After(3 * time.Second):
			t.Fatal("blocked on a planted FIFO")
		}
	}
	var v map[string]any
	if _, err := Read(card, "i", &v); err == nil {
		t.Fatal("read a FIFO as instance.json")
	}
}
