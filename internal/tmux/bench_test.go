package tmux_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// BenchmarkCaptureControlMode: one capture of a 120x40 screen over the
// persistent control-mode connection.
func BenchmarkCaptureControlMode(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	ctx := testCtx(b, 10*time.Minute)
	pane := programWindow(b, c, "", "sh", "-c", "seq 1 100; exec sleep 600")
	waitText(b, c, pane, `(?m)^100$`)
	for b.Loop() {
		if _, err := c.Capture(ctx, pane, tmux.CaptureOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCaptureSpawn: the same capture by starting `tmux capture-pane`
// each time, the cost the persistent client avoids.
func BenchmarkCaptureSpawn(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	pane := programWindow(b, c, "", "sh", "-c", "seq 1 100; exec sleep 600")
	waitText(b, c, pane, `(?m)^100$`)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, "tmux", "-S", s.Socket, "capture-pane", "-p", "-t", string(pane)).Output()
		cancel()
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkListPanes: the framed list-panes round trip.
func BenchmarkListPanes(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	ctx := testCtx(b, 10*time.Minute)
	for b.Loop() {
		if _, err := c.ListPanes(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRun: a full Run (probe, type, markers) of `true`.
func BenchmarkRun(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	ctx := testCtx(b, 10*time.Minute)
	for b.Loop() {
		if _, _, err := c.Run(ctx, "%0", "true"); err != nil {
			b.Fatal(err)
		}
	}
}
