package tmux_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// shellWindow opens a window with an integrated bash and waits for its prompt.
func shellWindow(t testing.TB, s *tmuxtest.Server, c *tmux.Client) tmux.PaneID {
	t.Helper()
	np, err := c.NewWindow(testCtx(t, 10*time.Second), tmux.NewWindowOptions{Name: "sh"})
	if err != nil {
		t.Fatalf("NewWindow: %v", err)
	}
	s.WaitPrompt(t, string(np.Pane))
	return np.Pane
}

// programWindow opens a window running argv directly.
func programWindow(t testing.TB, c *tmux.Client, dir string, argv ...string) tmux.PaneID {
	t.Helper()
	np, err := c.NewWindow(testCtx(t, 10*time.Second), tmux.NewWindowOptions{Name: "prog", Dir: dir, Argv: argv})
	if err != nil {
		t.Fatalf("NewWindow %q: %v", argv, err)
	}
	return np.Pane
}

// waitFile waits until path exists and holds want bytes, or fails.
func waitFile(t testing.TB, path string, want int) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) >= want {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes after 10s (want %d): %v", path, len(b), want, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitText waits for re in the pane with the code under test.
func waitText(t testing.TB, c *tmux.Client, pane tmux.PaneID, re string) {
	t.Helper()
	if _, err := c.Wait(testCtx(t, 15*time.Second), pane, tmux.WaitOptions{Pattern: regexp.MustCompile(re), Timeout: 10 * time.Second}); err != nil {
		t.Fatalf("waiting for %q in %s: %v", re, pane, err)
	}
}

func noCanary(t testing.TB, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "canary*"))
	if len(matches) > 0 {
		t.Fatalf("canary created: %v", matches)
	}
}
