package sockets

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSiblingsOnlyContainerDirs(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	th, in := ThreadKey("/w"), InstanceKey("i")
	cur, _ := l.ForContainer(th, in, cid)
	old, _ := l.ForContainer(th, in, strings.Repeat("a", 64))
	for _, d := range []Dir{cur, old} {
		if err := l.Create(d); err != nil {
			t.Fatal(err)
		}
	}
	inst := l.InstanceDir(th, in)
	victim := t.TempDir()
	os.WriteFile(filepath.Join(victim, "f"), []byte("x"), 0o600)
	os.Symlink(victim, filepath.Join(inst, "bbbbbbbbbbbb")) // named like one, a symlink
	os.Mkdir(filepath.Join(inst, "ABCDEFABCDEF"), 0o700)    // upper case
	os.Mkdir(filepath.Join(inst, "0123456789a"), 0o700)     // 11 digits
	os.WriteFile(filepath.Join(inst, "cccccccccccc"), nil, 0o600)
	got, err := l.Siblings(th, in, cur.CID12())
	if err != nil || !reflect.DeepEqual(got, []string{old.Path}) {
		t.Fatalf("Siblings = %v %v, want [%s]", got, err, old.Path)
	}
	removed, err := l.RemoveSiblings(th, in, cur.CID12())
	if err != nil || !reflect.DeepEqual(removed, []string{old.Path}) {
		t.Fatalf("RemoveSiblings = %v %v", removed, err)
	}
	for _, p := range []string{cur.Path, filepath.Join(inst, "bbbbbbbbbbbb"), filepath.Join(victim, "f"), filepath.Join(inst, "ABCDEFABCDEF"), filepath.Join(inst, "0123456789a"), filepath.Join(inst, "cccccccccccc")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := l.Siblings("x", in, ""); err == nil {
		t.Error("a bad key was accepted")
	}
	// A symlinked instance directory is refused, not followed.
	th2 := ThreadKey("/w2")
	os.MkdirAll(filepath.Join(l.Root(), th2), 0o700)
	os.Symlink(inst, l.InstanceDir(th2, in))
	if _, err := l.RemoveSiblings(th2, in, ""); err == nil {
		t.Error("RemoveSiblings followed a symlinked instance directory")
	}
	if _, err := os.Stat(cur.Path); err != nil {
		t.Error("the current directory went through the symlink")
	}
}

func TestCreateLevelsAndRemoveEmpty(t *testing.T) {
	rt := runtimeDir(t)
	l := Layout{Runtime: rt}
	th, in := ThreadKey("/w"), InstanceKey("i")
	d, _ := l.ForContainer(th, in, cid)
	made, err := l.CreateLevels(d)
	want := []string{l.Root(), filepath.Join(l.Root(), th), l.InstanceDir(th, in), d.Path}
	if err != nil || !reflect.DeepEqual(made, want) {
		t.Fatalf("made %v %v, want %v", made, err, want)
	}
	if again, err := l.CreateLevels(d); err != nil || len(again) != 0 {
		t.Fatalf("second CreateLevels made %v %v", again, err)
	}
	// What someone else put there keeps its level and those above.
	other, _ := l.ForContainer(th, InstanceKey("j"), cid)
	l.Create(other)
	RemoveEmpty(made)
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Error("an empty level made was kept")
	}
	if _, err := os.Stat(other.Path); err != nil {
		t.Error("another instance's directory went")
	}
	if _, err := os.Stat(l.InstanceDir(th, in)); !os.IsNotExist(err) {
		t.Error("the empty instance directory was kept")
	}
	os.RemoveAll(l.Root())
	RemoveEmpty(want)
	if ents, _ := os.ReadDir(rt); len(ents) != 0 {
		t.Errorf("left in the runtime directory: %v", ents)
	}
}
