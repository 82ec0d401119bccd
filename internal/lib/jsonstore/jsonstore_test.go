package jsonstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stem-edu/stem/internal/lib/statefile"
)

type content struct {
	Schema int            `json:"schema"`
	Counts map[string]int `json:"counts"`
}

func newStore(dir string) *Store[content] {
	return &Store[content]{
		Path: filepath.Join(dir, "s.json"), Lock: filepath.Join(dir, "s.lock"),
		Noun: "test store", What: "the test file", Repair: "move it aside",
		Empty: func() content { return content{Schema: 1, Counts: map[string]int{}} },
		Loaded: func(c *content) error {
			if c.Schema > 1 {
				return errors.New("newer schema")
			}
			if c.Counts == nil {
				c.Counts = map[string]int{}
			}
			return nil
		},
		Saving: func(c *content) { c.Schema = 1 },
	}
}

func TestLoadCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	s := newStore(dir)
	c, err := s.Load(context.Background())
	if err != nil || c.Schema != 1 || c.Counts == nil || len(c.Counts) != 0 {
		t.Fatalf("Load of a missing store: %+v %v", c, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load created %s (%v)", dir, err)
	}
}

func TestUpdateRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := newStore(dir)
	ctx := context.Background()
	if err := s.Update(ctx, func(c *content) error { c.Schema = 0; c.Counts["a"] = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	c, err := s.Load(ctx)
	if err != nil || c.Counts["a"] != 2 || c.Schema != 1 {
		t.Fatalf("after Update: %+v %v (want a=2, schema stamped 1)", c, err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, s.Path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode().Perm(), err, want)
		}
	}
	// A failing fn writes nothing.
	if err := s.Update(ctx, func(c *content) error { c.Counts["a"] = 9; return errors.New("no") }); err == nil {
		t.Fatal("fn's error lost")
	}
	if c, _ := s.Load(ctx); c.Counts["a"] != 2 {
		t.Fatalf("a failed Update wrote: %+v", c)
	}
}

func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	s := newStore(dir)
	ctx := context.Background()
	for name, data := range map[string]string{"blank": " \n", "missing counts": `{"schema":1}`} {
		os.WriteFile(s.Path, []byte(data), 0o600)
		if c, err := s.Load(ctx); err != nil || c.Counts == nil {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
	os.WriteFile(s.Path, []byte("{\n\"schema\": 1,\n\"counts\": {\"a\": 1"), 0o600)
	_, err := s.Load(ctx)
	var ce *statefile.CorruptError
	if !errors.As(err, &ce) || ce.Path != s.Path || ce.What != "the test file" || ce.Repair != "move it aside" {
		t.Fatalf("truncated file: %v", err)
	}
	if err := s.Update(ctx, func(c *content) error { return nil }); !errors.As(err, &ce) {
		t.Fatalf("Update over a damaged file: %v", err)
	}
	if data, _ := os.ReadFile(s.Path); string(data) != "{\n\"schema\": 1,\n\"counts\": {\"a\": 1" {
		t.Fatalf("Update rewrote a damaged file: %q", data)
	}
	os.WriteFile(s.Path, []byte(`{"schema":2}`), 0o600)
	if _, err := s.Load(ctx); err == nil || err.Error() != "newer schema" {
		t.Fatalf("Loaded's refusal: %v", err)
	}
}

// Concurrent updates each see the others' writes: no increment is lost.
func TestUpdatesSerialize(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A store value per writer, as separate processes would have.
			if err := newStore(dir).Update(ctx, func(c *content) error { c.Counts["n"]++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c, err := newStore(dir).Load(ctx); err != nil || c.Counts["n"] != n {
		t.Fatalf("after %d concurrent updates: %+v %v", n, c, err)
	}
}
