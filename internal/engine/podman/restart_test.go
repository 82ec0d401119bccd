//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

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
}
