package consent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
)

func assist() agentpolicy.Policy {
	return agentpolicy.Policy{MaxLevel: agentpolicy.CapAssist, Edits: agentpolicy.EditsPropose, Approve: []string{"task_action"}}
}

// TestFloorHolds: once set, the floor meets every later card policy; a
// loosened card changes nothing until SetFloor, and rm starts afresh.
func TestFloorHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Settle(ctx, "i", "c1", nil, assist(), nil, "stemctl up")
	if err != nil || got.MaxLevel != agentpolicy.CapAssist {
		t.Fatalf("first settle: %+v %v", got, err)
	}
	got, _ = s.Settle(ctx, "i", "c2", nil, agentpolicy.Default(), nil, "stemctl up")
	if got.MaxLevel != agentpolicy.CapAssist || got.Edits != agentpolicy.EditsPropose || len(got.Approve) != 1 {
		t.Fatalf("a loosened card loosened the policy: %+v", got)
	}
	tight := agentpolicy.Policy{MaxLevel: agentpolicy.CapObserve, Edits: agentpolicy.EditsNone}
	if got, _ = s.Settle(ctx, "i", "c2", nil, tight, nil, "stemctl up"); got.MaxLevel != agentpolicy.CapObserve {
		t.Fatalf("a tighter card did not tighten: %+v", got)
	}
	// Control: the floor, not the store, is what held.
	if err := s.SetFloor(ctx, "i", agentpolicy.Default(), "stemctl policy --loosen on /dev/pts/9"); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.Settle(ctx, "i", "c3", nil, agentpolicy.Default(), nil, "stemctl up"); !got.IsDefault() {
		t.Fatalf("after --loosen: %+v", got)
	}
	if err := s.Delete(ctx, "i"); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.Get(ctx, "i"); e.Floor != nil {
		t.Fatalf("rm kept the floor: %+v", e)
	}
}

// TestSettleKeepsOlderRecord: an instance recorded by an older stem keeps
// the policy on its record as its floor, not the card's current one.
func TestSettleKeepsOlderRecord(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir())
	prior := assist()
	got, err := s.Settle(context.Background(), "i", "c1", &prior, agentpolicy.Default(), nil, "stemctl up")
	if err != nil || got.MaxLevel != agentpolicy.CapAssist {
		t.Fatalf("got %+v %v", got, err)
	}
}

// TestPanesBelongToOneRun: a pane allowed in one container is not allowed
// in another, nor after the container starts again (Settle).
func TestPanesBelongToOneRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := Open(t.TempDir())
	s.Settle(ctx, "i", "c1", nil, assist(), nil, "up")
	s.Update(ctx, "i", func(e *Entry) error {
		e.Panes = append(e.Panes, Pane{ContainerID: "c1", Pane: "%1"})
		e.Edits = append(e.Edits, Edit{File: "src/a.c"})
		return nil
	})
	e, _ := s.Get(ctx, "i")
	if !e.PaneAllowed("c1", "%1") || e.PaneAllowed("c2", "%1") || e.PaneAllowed("c1", "%2") || !e.Editable("src/a.c") || e.Editable("src/b.c") {
		t.Fatalf("entry: %+v", e)
	}
	s.Settle(ctx, "i", "c1", nil, assist(), nil, "up")
	e, _ = s.Get(ctx, "i")
	if e.PaneAllowed("c1", "%1") || !e.Editable("src/a.c") {
		t.Fatalf("after a restart: %+v", e)
	}
}

// TestCorruptFailsClosed: a damaged file allows nothing and says what to do.
func TestCorruptFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	os.WriteFile(filepath.Join(dir, "consent.json"), []byte("{"), 0o600)
	if _, err := s.Get(context.Background(), "i"); err == nil || !strings.Contains(err.Error(), "moved aside") {
		t.Fatalf("got %v", err)
	}
	if _, err := s.Settle(context.Background(), "i", "c", nil, agentpolicy.Default(), nil, "up"); err == nil {
		t.Fatal("settle over a corrupt file succeeded")
	}
}

func TestCleanFile(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"src/a.c": "src/a.c", "./src//a.c": "src/a.c", "src/../b.c": "b.c"} {
		if got, err := CleanFile(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"", "/etc/passwd", "..", "../x", "a/../../x", ".git/config", ".stem/x", "."} {
		if got, err := CleanFile(in); err == nil {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
}

// TestEditableFloor: the globs recorded at the first settle stay whatever
// later cards say, until the student loosens on the host; rm forgets them.
func TestEditableFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := Open(t.TempDir())
	if _, err := s.Settle(ctx, "i", "c1", nil, assist(), []string{"t1/words.c"}, "stemctl up"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, "i", "c2", nil, assist(), []string{"t1/words.c", "t1/**"}, "stemctl up"); err != nil {
		t.Fatal(err)
	}
	e, _ := s.Get(ctx, "i")
	if got := e.FloorEditable(); len(got) != 1 || got[0] != "t1/words.c" {
		t.Fatalf("a card with more globs widened the editable floor: %q", got)
	}
	if err := s.Loosen(ctx, "i", assist(), []string{"t1/words.c", "t1/**"}, "stemctl policy --loosen on /dev/pts/9"); err != nil {
		t.Fatal(err)
	}
	if e, _ = s.Get(ctx, "i"); len(e.FloorEditable()) != 2 || e.FloorBy != "stemctl policy --loosen on /dev/pts/9" {
		t.Fatalf("after --loosen: %+v", e)
	}
	// A card with no globs records an empty floor, not none.
	if _, err := s.Settle(ctx, "j", "c1", nil, assist(), nil, "stemctl up"); err != nil {
		t.Fatal(err)
	}
	if e, _ = s.Get(ctx, "j"); e.EditableFloor == nil || len(*e.EditableFloor) != 0 {
		t.Fatalf("no globs: %+v", e.EditableFloor)
	}
	if err := s.Delete(ctx, "i"); err != nil {
		t.Fatal(err)
	}
	if e, _ = s.Get(ctx, "i"); e.EditableFloor != nil {
		t.Fatalf("rm kept the editable floor: %+v", e)
	}
}
