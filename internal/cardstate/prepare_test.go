package cardstate

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPrepareUndoLeavesTheCardAsItWas(t *testing.T) {
	card := t.TempDir()
	// History from the older layout is carried over, then taken away.
	old := filepath.Join(card, ".rv", "instances", "i")
	os.MkdirAll(old, 0o755)
	os.WriteFile(filepath.Join(old, HistoryFile), []byte("ls\n"), 0o600)
	dir, undo, err := Prepare(card, "i")
	if err != nil || dir != Dir(card, "i") {
		t.Fatalf("%s %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, HistoryFile)); err != nil {
		t.Fatal("history not carried over")
	}
	Write(card, "i", map[string]string{"a": "b"})
	undo()
	if _, err := os.Lstat(filepath.Join(card, ".stem")); !os.IsNotExist(err) {
		t.Fatalf(".stem survived undo: %v", err)
	}
	if _, err := os.Stat(filepath.Join(old, HistoryFile)); err != nil {
		t.Fatal("undo touched .rv")
	}

	// Existing levels stay; so does anything else in the directory.
	os.MkdirAll(filepath.Join(card, ".stem", "instances"), 0o755)
	os.WriteFile(filepath.Join(card, ".stem", "notes"), nil, 0o644)
	dir, undo, _ = Prepare(card, "j")
	os.WriteFile(filepath.Join(dir, "student-file"), nil, 0o644)
	undo()
	if _, err := os.Stat(filepath.Join(dir, "student-file")); err != nil {
		t.Fatal("undo removed a file it did not make")
	}
	os.Remove(filepath.Join(dir, "student-file"))
	os.Remove(dir)
	_, undo, _ = Prepare(card, "j")
	undo()
	if _, err := os.Lstat(Dir(card, "j")); !os.IsNotExist(err) {
		t.Fatal("the instance directory survived undo")
	}
	if _, err := os.Stat(filepath.Join(card, ".stem", "instances")); err != nil {
		t.Fatal("undo removed a level that existed before")
	}

	// A pre-existing instance directory: undo does nothing.
	Write(card, "k", map[string]string{"a": "b"})
	_, undo, _ = Prepare(card, "k")
	undo()
	if _, err := os.Stat(filepath.Join(Dir(card, "k"), InstanceFile)); err != nil {
		t.Fatal("undo removed the state of an instance that had one")
	}

	// A level swapped for a symlink after Prepare: undo follows nothing.
	victim := t.TempDir()
	os.MkdirAll(filepath.Join(victim, "instances", "m"), 0o755)
	os.WriteFile(filepath.Join(victim, "instances", "m", InstanceFile), nil, 0o644)
	card2 := t.TempDir()
	_, undo, _ = Prepare(card2, "m")
	os.RemoveAll(filepath.Join(card2, ".stem"))
	os.Symlink(victim, filepath.Join(card2, ".stem"))
	undo()
	if _, err := os.Stat(filepath.Join(victim, "instances", "m", InstanceFile)); err != nil {
		t.Fatal("undo went through a symlink")
	}
}

func TestReadRefusesSymlinkedLevels(t *testing.T) {
	card, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(outside, "instances", "i"), 0o755)
	os.WriteFile(filepath.Join(outside, "instances", "i", InstanceFile), []byte(`{"a":"x"}`), 0o644)
	os.Symlink(outside, filepath.Join(card, ".rv"))
	var v map[string]string
	if dir, err := Read(card, "i", &v); err == nil {
		t.Fatalf("read %v from %s through a symlinked .rv", v, dir)
	}
}
