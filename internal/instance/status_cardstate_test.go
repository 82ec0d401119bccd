package instance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/registry"
)

// Status shows the card's copy of the record, read from .stem/ or, for an
// older card, from .rv/; a reuse writes .stem/ when it is missing or stale.
func TestStatusShowsCardStateWithRvFallback(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	st, err := w.m.Status(ctx, rec.Instance)
	if err != nil {
		t.Fatal(err)
	}
	if cs := st.CardState; cs == nil || cs.Dir != cardstate.Dir(r.CardPath, rec.Instance) || cs.Legacy || !cs.Current || cs.ContainerID != rec.ContainerID {
		t.Fatalf("card state after up: %+v", st.CardState)
	}

	// A card that only has the older layout.
	if err := os.Remove(filepath.Join(cardstate.Dir(r.CardPath, rec.Instance), cardstate.InstanceFile)); err != nil {
		t.Fatal(err)
	}
	rv := filepath.Join(r.CardPath, ".rv", "instances", rec.Instance)
	writeRv := func(id string) {
		t.Helper()
		old := rec
		old.ContainerID = id
		data, _ := json.Marshal(old)
		if err := os.MkdirAll(rv, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rv, cardstate.InstanceFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRv(rec.ContainerID)
	st, _ = w.m.Status(ctx, rec.Instance)
	if cs := st.CardState; cs == nil || cs.Dir != rv || !cs.Legacy || !cs.Current {
		t.Fatalf("card state from .rv/: %+v", st.CardState)
	}
	other := strings.Repeat("a", 64)
	writeRv(other)
	st, _ = w.m.Status(ctx, rec.Instance)
	if cs := st.CardState; cs == nil || cs.Current || cs.ContainerID != other {
		t.Fatalf("a stale .rv/ state: %+v", st.CardState)
	}
	if st.State != "running" {
		t.Fatalf("card state made the instance %s: %v", st.State, st.Problems)
	}
	// The container can write the card: a malformed id is not shown.
	writeRv("../../etc/passwd")
	st, _ = w.m.Status(ctx, rec.Instance)
	if cs := st.CardState; cs == nil || cs.ContainerID != "" || cs.Current {
		t.Fatalf("a malformed id: %+v", st.CardState)
	}
	// A .rv that is a symlink out of the card is not read.
	os.RemoveAll(filepath.Join(r.CardPath, ".rv"))
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "instances", rec.Instance), 0o755)
	os.WriteFile(filepath.Join(outside, "instances", rec.Instance, cardstate.InstanceFile), []byte(`{"container_id":"`+rec.ContainerID+`"}`), 0o644)
	if err := os.Symlink(outside, filepath.Join(r.CardPath, ".rv")); err != nil {
		t.Fatal(err)
	}
	st, _ = w.m.Status(ctx, rec.Instance)
	if cs := st.CardState; cs == nil || cs.Error == "" || cs.Dir != "" {
		t.Fatalf("state read through a symlinked .rv: %+v", st.CardState)
	}
	os.Remove(filepath.Join(r.CardPath, ".rv"))

	// The next up (a reuse) writes .stem/ again.
	if res := w.up(r); res.Action != instance.Reused {
		t.Fatalf("up: %+v", res)
	}
	var got registry.Record
	if dir, err := cardstate.Read(r.CardPath, rec.Instance, &got); err != nil || dir != cardstate.Dir(r.CardPath, rec.Instance) || got.ContainerID != rec.ContainerID {
		t.Fatalf("card state after reuse: %s %+v %v", dir, got, err)
	}
}

// Status lists a predecessor's directory beside the current one, and the
// next up removes it.
func TestStatusReportsStaleSiblings(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	stale := filepath.Join(filepath.Dir(rec.SocketDir), "0123456789ab")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(filepath.Dir(rec.SocketDir), "not-a-cid"), 0o700)
	st, err := w.m.Status(ctx, rec.Instance)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stale) != 1 || st.Stale[0] != stale {
		t.Fatalf("stale: %v, want [%s]", st.Stale, stale)
	}
	if st.State != "running" {
		t.Fatalf("a stale directory made the instance %s", st.State)
	}
	w.up(r)
	if st, _ := w.m.Status(ctx, rec.Instance); len(st.Stale) != 0 {
		t.Fatalf("stale after up: %v", st.Stale)
	}
	os.Remove(filepath.Join(filepath.Dir(rec.SocketDir), "not-a-cid"))
}
