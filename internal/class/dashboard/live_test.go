package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class"
)

// A tile names the card of the task as well as the task: two cards of a
// worksheet both have a task 1.
func TestLiveTileNamesTheCard(t *testing.T) {
	t.Parallel()
	b := NewBoard([]string{"s1"})
	l := NewLive([]string{"s1"}, newFake(), b, LiveOptions{Every: time.Second, Timeout: 5 * time.Second})
	l.probe(context.Background(), "s1")
	tile, ok := b.Get("s1")
	if !ok || tile.Card != "demo/hello" || tile.Task != "1" || tile.Instance != "hello-1" {
		t.Fatalf("tile %+v", tile)
	}
}

// A student whose session ends is gone; one whose gate then answers with
// no instance running is not: their tile takes their status again (which
// names the instance that is down).
func TestLiveNoInstanceIsNotGone(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.levels["s1"] = "observe"
	b := NewBoard([]string{"s1"})
	l := NewLive([]string{"s1"}, f, b, LiveOptions{Every: time.Millisecond, StatusEvery: time.Millisecond, Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.keep(ctx, "s1")
	until := func(what string, ok func(Tile) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // polling a condition
			if tile, _ := b.Get("s1"); ok(tile) {
				return
			}
			if time.Now().After(deadline) {
				tile, _ := b.Get("s1")
				t.Fatalf("never %s: %+v", what, tile)
			}
		}
	}
	until("answers", func(t Tile) bool { return t.State == "answers" })
	f.mu.Lock()
	delete(f.levels, "s1")
	f.links = []class.Link{{Student: "s1", Error: "the session ended"}}
	f.mu.Unlock()
	until("gone", func(t Tile) bool { return t.State == "gone" })
	f.mu.Lock()
	f.links = []class.Link{{Student: "s1", Error: "no instance of this student answers", NoInstance: true}}
	f.mu.Unlock()
	until("back to its status", func(t Tile) bool { return t.State == "answers" })
}
