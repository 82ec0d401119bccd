package dashboard

import (
	"context"
	"testing"
	"time"
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
