package inspect

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

type countingInspector struct {
	calls int
	ctr   engine.Container
	err   error
}

func (f *countingInspector) Inspect(ctx context.Context, id string) (engine.Container, error) {
	f.calls++
	return f.ctr, f.err
}

// sleeperEnv makes the test binary stand in for a long-running process,
// so the test needs nothing but Go.
const sleeperEnv = "STEM_TEST_SLEEPER"

func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) == "1" {
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Podman is asked once while the container's first process runs, and
// again as soon as that process is gone.
func TestCachedFollowsTheFirstProcess(t *testing.T) {
	sleep := exec.Command(os.Args[0])
	sleep.Env = append(os.Environ(), sleeperEnv+"=1")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			sleep.Process.Kill()
			sleep.Wait()
		}
	})
	id := strings.Repeat("ab", 32)
	inner := &countingInspector{ctr: engine.Container{ID: id, Running: true, State: "running", Pid: sleep.Process.Pid, Labels: map[string]string{"k": "v"}}}
	c := &Cached{Inner: inner}
	ctx := context.Background()
	for range 3 {
		got, err := c.Inspect(ctx, id)
		if err != nil || !got.Running || got.Labels["k"] != "v" {
			t.Fatalf("Inspect = %+v, %v", got, err)
		}
		got.Labels["k"] = "changed by a caller"
	}
	if inner.calls != 1 {
		t.Fatalf("Podman asked %d times while the container ran, want 1", inner.calls)
	}

	sleep.Process.Kill()
	sleep.Wait()
	done = true
	inner.ctr, inner.err = engine.Container{}, engine.ErrNotFound
	if _, err := c.Inspect(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("after the process ended: %v, want ErrNotFound from Podman", err)
	}
	if inner.calls != 2 {
		t.Fatalf("Podman asked %d times in all, want 2", inner.calls)
	}
	// Not running, not cached: every call asks.
	inner.ctr, inner.err = engine.Container{ID: id, State: "exited"}, nil
	c.Inspect(ctx, id)
	c.Inspect(ctx, id)
	if inner.calls != 4 {
		t.Fatalf("a stopped container was answered from memory (%d calls)", inner.calls)
	}
}
