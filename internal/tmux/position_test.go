package tmux_test

import (
	"context"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func TestCapturePosition(t *testing.T) {
	srv := tmuxtest.Start(t, tmuxtest.Options{Width: 80, Height: 10})
	c := srv.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	panes, err := c.ListPanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pane := panes[0].ID
	srv.WaitPrompt(t, string(pane))
	// Push lines into the history.
	if _, _, err := c.Run(ctx, pane, "seq 1 40"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Capture(ctx, pane, tmux.CaptureOptions{Position: true})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.PaneInfo(ctx, pane)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Position
	if p == nil || p.HistorySize != info.HistorySize || p.CursorY != info.CursorY || p.Height != info.Height || p.HistorySize < 30 {
		t.Fatalf("position %+v, pane info %+v", p, info)
	}
	p2, err := c.PanePosition(ctx, pane)
	if err != nil || p2 != *p {
		t.Fatalf("PanePosition %+v %v, capture said %+v", p2, err, *p)
	}
	if _, err := c.PanePosition(ctx, "%999"); err == nil {
		t.Fatal("position of a missing pane")
	}
}
