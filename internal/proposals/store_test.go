package proposals

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/provenance"
	"github.com/stem-edu/stem/internal/registry"
)

func record(t *testing.T, id string, hunks ...Hunk) *Record {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return &Record{Key: key, ID: id, Instance: "inst", Path: "t1/main.c", From: "agent a1", Tool: "nvim_buffer_edit",
		Who: provenance.Who{Account: "alice", Agent: "a1", Level: "assist"}, Created: time.Now(), Hunks: hunks}
}

func TestStore(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := Open(state, "inst")
	if all, err := s.List(); err != nil || len(all) != 0 {
		t.Fatalf("empty store: %v %v", all, err)
	}
	old := record(t, "p1", Hunk{Start: 1, New: []string{"x"}, State: Rejected})
	old.Created = time.Now().Add(-time.Hour)
	cur := record(t, "p1", Hunk{Start: 1, New: []string{"y"}, State: Pending})
	for _, r := range []*Record{cur, old} {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if old.State != Rejected || cur.State != Pending {
		t.Fatalf("states %s %s", old.State, cur.State)
	}
	fi, err := os.Stat(s.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("store dir %v %v", fi, err)
	}
	// A restarted editor numbers from p1 again: the newest is meant.
	if r, err := s.Find("p1"); err != nil || r.Key != cur.Key {
		t.Fatalf("Find p1: %+v %v", r, err)
	}
	if r, err := s.Find(old.Key[:8]); err != nil || r.Key != old.Key {
		t.Fatalf("Find by key: %+v %v", r, err)
	}
	if _, err := s.Find("p9"); err == nil {
		t.Fatal("found p9")
	}
	// Another instance's store does not see them; a bad key is refused.
	if all, _ := Open(state, "other").List(); len(all) != 0 {
		t.Fatalf("another instance sees %d", len(all))
	}
	if _, err := s.Get("../../etc/passwd"); err == nil {
		t.Fatal("a key that is a path was read")
	}
	bad := record(t, "p2")
	bad.Instance = "other"
	if err := s.Put(bad); err == nil {
		t.Fatal("a record of another instance was put")
	}
}

func TestOverall(t *testing.T) {
	t.Parallel()
	h := func(states ...string) []Hunk {
		var out []Hunk
		for _, s := range states {
			out = append(out, Hunk{State: s})
		}
		return out
	}
	for _, c := range []struct {
		hs   []Hunk
		want string
	}{
		{h(Pending, Accepted), Pending}, {h(Accepted, Accepted), Accepted}, {h(Accepted, Rejected), Partial},
		{h(Stale, Rejected), Stale}, {h(Rejected), Rejected}, {h(Accepted, Stale), Partial},
	} {
		if got := Overall(c.hs); got != c.want {
			t.Errorf("%v: %s, want %s", c.hs, got, c.want)
		}
	}
}

// TestDecideOnFile: a proposal whose file is open in no editor is applied
// to the saved file, at its own lines only: a hunk whose lines changed is
// stale; provenance and the audit log name the host input.
func TestDecideOnFile(t *testing.T) {
	t.Parallel()
	state, card := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(card, "t1"), 0o755)
	file := filepath.Join(card, "t1", "main.c")
	os.WriteFile(file, []byte("int main(void)\n{\n    int a = 1;\n    return a;\n}\n"), 0o640)
	s := Open(state, "inst")
	r := record(t, "p1",
		Hunk{Start: 3, Old: []string{"    int a = 1;"}, New: []string{"    int a = 2;", "    int b = 3;"}, State: Pending},
		Hunk{Start: 4, Old: []string{"    return 0;"}, New: []string{"    return a + b;"}, State: Pending},
		Hunk{Start: 1, Before: true, Ctx: "int main(void)", New: []string{"#include <stdio.h>"}, State: Pending})
	r.Card = card
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	d := Decide{Accept: true, Hunks: []int{1, 2}, Input: "stemctl proposals on /dev/pts/9", Instance: registry.Record{Instance: "inst", CardPath: card}, StateDir: state, Audit: lg}
	out, err := s.Decide(context.Background(), r, d)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	if want := "int main(void)\n{\n    int a = 2;\n    int b = 3;\n    return a;\n}\n"; string(got) != want || out.Via != "file" {
		t.Fatalf("file %q via %s", got, out.Via)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if sts := []string{r.Hunks[0].State, r.Hunks[1].State, r.Hunks[2].State}; !slices.Equal(sts, []string{Accepted, Stale, Pending}) || r.State != Pending || r.Hunks[0].At != 3 {
		t.Fatalf("states %v %s at %d", sts, r.State, r.Hunks[0].At)
	}
	// The third hunk, then: inserted at the top.
	d.Hunks = []int{3}
	if _, err := s.Decide(context.Background(), r, d); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); !strings.HasPrefix(string(got), "#include <stdio.h>\nint main(void)\n") || r.State != Partial {
		t.Fatalf("file %q state %s", got, r.State)
	}
	if _, err := s.Decide(context.Background(), r, d); !errors.Is(err, ErrDecided) {
		t.Fatalf("deciding twice: %v", err)
	}
	h, err := provenance.Open(state).Read(card, "t1/main.c")
	if err != nil || len(h.Changes) != 2 || h.Changes[0].AcceptedBy != "the student at stemctl proposals on /dev/pts/9" || h.Changes[0].Who.Agent != "a1" {
		t.Fatalf("provenance %+v %v", h, err)
	}
	b := provenance.Blame(h, provenance.SplitFile(mustRead(t, file)))
	if b[0].By != provenance.ByAgent || b[3].By != provenance.ByAgent || b[4].By != provenance.ByAgent || b[1].By != provenance.ByContainer {
		t.Fatalf("blame %+v", b)
	}
	es, err := lg.Read(audit.Filter{})
	if err != nil || len(es) != 2 || es[0].Event != audit.ProposalDecision || es[0].Agent != "a1" || !strings.Contains(es[0].Detail, "accepted by the student at stemctl proposals on /dev/pts/9") {
		t.Fatalf("audit %+v %v", es, err)
	}
}

// TestDecideRefusesUnaudited: nothing is applied when the decision cannot
// be audited.
func TestDecideRefusesUnaudited(t *testing.T) {
	t.Parallel()
	state, card := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(card, "t1"), 0o755)
	file := filepath.Join(card, "t1", "main.c")
	os.WriteFile(file, []byte("a\n"), 0o644)
	s := Open(state, "inst")
	r := record(t, "p1", Hunk{Start: 1, Old: []string{"a"}, New: []string{"b"}, State: Pending})
	lg, _ := audit.Open(state)
	os.WriteFile(lg.Path(), []byte("not a log line\n"), 0o600)
	_, err := s.Decide(context.Background(), r, Decide{Accept: true, Input: "x", Instance: registry.Record{Instance: "inst", CardPath: card}, StateDir: state, Audit: lg})
	if err == nil {
		t.Fatal("decided without an audit log")
	}
	if got := mustRead(t, file); string(got) != "a\n" {
		t.Fatalf("applied: %q", got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecideRefusesAnotherCard: a proposal is applied only to the card it
// was made in, not to whatever card its instance's record names now.
func TestDecideRefusesAnotherCard(t *testing.T) {
	t.Parallel()
	state, card, other := t.TempDir(), t.TempDir(), t.TempDir()
	for _, c := range []string{card, other} {
		os.MkdirAll(filepath.Join(c, "t1"), 0o755)
		os.WriteFile(filepath.Join(c, "t1", "main.c"), []byte("a\n"), 0o644)
	}
	r := record(t, "p1", Hunk{Start: 1, Old: []string{"a"}, New: []string{"b"}, State: Pending})
	r.Card = card
	lg, _ := audit.Open(state)
	d := Decide{Accept: true, Input: "x", Instance: registry.Record{Instance: "inst", CardPath: other}, StateDir: state, Audit: lg}
	if _, err := Open(state, "inst").Decide(context.Background(), r, d); err == nil || !strings.Contains(err.Error(), "nothing was applied") {
		t.Fatalf("another card: %v", err)
	}
	// Control: the card it was made in takes it.
	d.Instance.CardPath = card
	if _, err := Open(state, "inst").Decide(context.Background(), r, d); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]string{card: "b\n", other: "a\n"} {
		if got := mustRead(t, filepath.Join(c, "t1", "main.c")); string(got) != want {
			t.Fatalf("%s: %q", c, got)
		}
	}
}
