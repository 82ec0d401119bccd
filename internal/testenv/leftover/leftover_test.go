package leftover

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

const sleeperEnv = "STEM_LEFTOVER_TEST_SLEEPER"

// TestMain lets the test binary stand in for sleep(1), which a machine
// with only Go need not have.
func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sleeper is a process that sleeps for a minute.
func sleeper() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), sleeperEnv+"=1")
	return cmd
}

// endedOwner returns the mark of a process that ran and has ended.
func endedOwner(t *testing.T) string {
	t.Helper()
	cmd := sleeper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mark := owner(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if alive(mark) {
		t.Fatalf("the ended owner %s still counts as alive", mark)
	}
	return mark
}

// marked starts a process carrying mark in its environment.
func marked(t *testing.T, mark string) *exec.Cmd {
	t.Helper()
	cmd := sleeper()
	cmd.Env = append(cmd.Env, EnvVar+"="+mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// A process left by an ended owner is killed; one of a live owner (this
// test) and one without a mark are not.
func TestSweepProcesses(t *testing.T) {
	left := marked(t, endedOwner(t))
	live := marked(t, Owner())
	plain := sleeper()
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	ended := make(chan error, 1)
	go func() { ended <- left.Wait() }()

	processes()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover process still runs")
	}
	for _, c := range []*exec.Cmd{live, plain} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%v was ended: %v", c.Args, err)
		}
	}
}

func TestOwner(t *testing.T) {
	if !alive(Owner()) {
		t.Fatalf("this process's mark %s is not alive", Owner())
	}
	pid, _, _ := strings.Cut(Owner(), ":")
	if alive(pid + ":0") {
		t.Error("a mark with another start time (a reused pid) counts as this process")
	}
	for _, m := range []string{"", "x", "12:", "-1:5"} {
		if !alive(m) {
			t.Errorf("%q is not a mark but was taken for an ended owner", m)
		}
	}
}

// A container left by an ended owner is removed; one of a live owner is
// not.
func TestSweepContainers(t *testing.T) {
	needs.Program(t, "podman", "podman")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(mark string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "podman", "create", "--label", Label+"="+mark, "localhost/stem-base:bookworm", "true").CombinedOutput()
		if err != nil {
			t.Fatalf("podman create (base image built? make images): %v\n%s", err, out)
		}
		id := strings.TrimSpace(string(out))
		t.Cleanup(func() { exec.Command("podman", "rm", "-f", id).Run() })
		return id
	}
	left, live := create(endedOwner(t)), create(Owner())
	containers()
	exists := func(id string) bool {
		return exec.CommandContext(ctx, "podman", "container", "exists", id).Run() == nil
	}
	if exists(left) {
		t.Error("the leftover container is still there")
	}
	if !exists(live) {
		t.Error("the live owner's container was removed")
	}
}
