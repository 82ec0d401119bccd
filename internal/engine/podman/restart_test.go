//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// The Podman service killed between two calls of one command: a call that
// changes nothing starts it again, as Connect does when none answers, and
// is answered; an engine that does not start services reports the dead
// service instead (the control: the kill is real).
func TestServiceKilledMidCommandIsStartedAgain(t *testing.T) {
	podmanTest(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "podman.sock")
	opts := Options{URI: "unix://" + sock, StartService: true, LogDir: filepath.Join(dir, "log")}
	e, err := Connect(testCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{e.Service().PID}
	t.Cleanup(func() {
		if pid, err := peerPID(sock); err == nil {
			pids = append(pids, pid) // the last one started
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	})
	if _, err := e.List(testCtx(t), map[string]string{"io.stem.test.none": "1"}); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		t.Helper()
		pid, err := peerPID(sock)
		if err != nil {
			t.Fatalf("the service's pid: %v", err)
		}
		pids = append(pids, pid)
		p, _ := os.FindProcess(pid)
		p.Kill()
		// Gone once its socket refuses a dial.
		for probe(testCtx(t), sock) == nil {
		}
	}
	fixed := *e
	fixed.opts.StartService = false
	kill()
	if _, err := fixed.List(testCtx(t), nil); err == nil {
		t.Fatal("control: List answered with the service killed and nothing to start it")
	}
	if _, err := e.List(testCtx(t), map[string]string{"io.stem.test.none": "1"}); err != nil {
		t.Fatalf("List after the service was killed: %v", err)
	}
	kill()
	if _, err := e.Inspect(testCtx(t), "stem-no-such-container"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Inspect after the service was killed: %v, want the service's not-found answer", err)
	}

	// Calls that change something, each after a kill: what a dead
	// service never received is asked of the new one, so a container is
	// made, started, run in and removed.
	spec := sleeper(nil)
	kill()
	if _, err := fixed.Create(testCtx(t), spec); err == nil {
		t.Fatal("control: Create answered with the service killed and nothing to start it")
	}
	id, err := e.Create(testCtx(t), spec)
	if err != nil {
		t.Fatalf("Create after the service was killed: %v", err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			e.Remove(context.Background(), id, true)
		}
	})
	kill()
	if err := e.Start(testCtx(t), id); err != nil {
		t.Fatalf("Start after the service was killed: %v", err)
	}
	kill()
	var out strings.Builder
	if code, err := e.Exec(testCtx(t), id, engine.ExecSpec{Cmd: []string{"echo", "ran"}, Stdout: &out}); err != nil || code != 0 || out.String() != "ran\n" {
		t.Fatalf("Exec after the service was killed: %d %q %v", code, out.String(), err)
	}
	kill()
	if err := e.Remove(testCtx(t), id, true); err != nil {
		t.Fatalf("Remove after the service was killed: %v", err)
	}
	removed = true
	// A call that is not asked again says the service was started again
	// and the command can be run again, not to start it with systemctl.
	kill()
	err = e.Rename(testCtx(t), id, testName())
	var he *HintError
	if err == nil || !errors.As(err, &he) || !strings.Contains(he.Hint, "stem started it again: run the command again") || strings.Contains(err.Error(), "systemctl") {
		t.Fatalf("Rename with the service killed: %v", err)
	}
	if probe(testCtx(t), sock) != nil {
		t.Fatal("no service answers after the refused Rename")
	}
}

// The service killed while it holds a call: a Stop it is waiting out (the
// container ignores its first SIGTERM). The call is asked again of a
// service started again, as a Stop may be, and the container ends
// stopped; an engine that does not start services fails the call (the
// control: the call was in the dying service's hands).
func TestServiceKilledHoldingACall(t *testing.T) {
	podmanTest(t)
	for _, starts := range []bool{false, true} {
		dir := t.TempDir()
		sock := filepath.Join(dir, "run", "podman.sock")
		e, err := Connect(testCtx(t), Options{URI: "unix://" + sock, StartService: true, LogDir: filepath.Join(dir, "log")})
		if err != nil {
			t.Fatal(err)
		}
		pids := []int{e.Service().PID}
		t.Cleanup(func() {
			if pid, err := peerPID(sock); err == nil {
				pids = append(pids, pid)
			}
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		})
		spec := sleeper(nil)
		// The first SIGTERM is ignored, a second ends it.
		// Bounded (five minutes), so that no run can leave it looping.
		spec.Command = []string{"sh", "-c", "trap '[ -e /tmp/t ] && exit 0; : >/tmp/t; echo got-term' TERM; echo ready; n=0; while [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done"}
		id, err := e.Create(testCtx(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Remove(context.Background(), id, true) })
		if err := e.Start(testCtx(t), id); err != nil {
			t.Fatal(err)
		}
		logs := func() string {
			out, _ := e.LogTail(testCtx(t), id, 10)
			return out
		}
		for !strings.Contains(logs(), "ready") {
		}
		eng := *e
		eng.opts.StartService = starts
		stopped := make(chan error, 1)
		go func() { stopped <- eng.Stop(testCtx(t), id, 2*time.Minute) }()
		// The service has the Stop once the container got its SIGTERM.
		for !strings.Contains(logs(), "got-term") {
		}
		pid, err := peerPID(sock)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		syscall.Kill(pid, syscall.SIGKILL)
		err = <-stopped
		if !starts {
			if err == nil || probe(testCtx(t), sock) == nil {
				t.Fatalf("control: Stop with its service killed and nothing to start it: %v", err)
			}
			// The container is left "stopping", still running: a forced
			// Remove (which starts a service) must end its processes, not
			// only its record (Podman's own forced remove left them
			// running, out of every listing).
			c, err := e.Inspect(testCtx(t), id)
			if err != nil || c.State != "stopping" || c.Pid <= 0 {
				t.Fatalf("after the interrupted Stop: %+v %v; want it stopping with a pid", c, err)
			}
			if err := e.Remove(testCtx(t), id, true); err != nil {
				t.Fatalf("Remove of the stopping container: %v", err)
			}
			for deadline := time.Now().Add(10 * time.Second); processLives(c.Pid); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					syscall.Kill(c.Pid, syscall.SIGKILL)
					t.Fatalf("the removed container's pid %d still runs", c.Pid)
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("Stop with its service killed under it: %v", err)
		}
		c, err := e.Inspect(testCtx(t), id)
		if err != nil || c.Running {
			t.Fatalf("after the Stop the container is %+v, %v; want it stopped", c, err)
		}
	}
}

// processLives: pid exists and is not a zombie.
func processLives(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
