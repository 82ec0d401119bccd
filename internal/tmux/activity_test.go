package tmux_test

import (
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// Output in a window moves the session's activity; another control-mode
// client attaching (stem's own connections, an agent's) does not. tmux
// keeps these times in whole seconds, so the test waits for the clock to
// pass the second of the last one before each step.
func TestActivity(t *testing.T) {
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	c := srv.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	pane := shellWindow(t, srv, c)
	first, err := c.Activity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.IsZero() || first.After(time.Now()) {
		t.Fatalf("activity of a new session: %v", first)
	}
	nextSecond := func(after time.Time) {
		for time.Now().Unix() <= after.Unix() {
			time.Sleep(10 * time.Millisecond)
		}
	}

	nextSecond(first)
	srv.Dial(t) // a second control client
	if got, err := c.Activity(ctx); err != nil || !got.Equal(first) {
		t.Fatalf("after a control client attached: %v %v, want %v", got, err, first)
	}

	srv.Tmux(t, "send-keys", "-t", string(pane), "echo activity-marker", "Enter")
	waitText(t, c, pane, `(?m)^activity-marker`)
	got, err := c.Activity(ctx)
	if err != nil || !got.After(first) {
		t.Fatalf("after output: %v %v, want after %v", got, err, first)
	}
}
