//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containers/podman/v5/pkg/specgen"

	"github.com/stem-edu/stem/internal/engine"
)

// A container started through a service whose containers.conf breaks it
// (ulimits above fs.nr_open) says which CONTAINERS_CONF that service runs
// with, and, to a caller whose CONTAINERS_CONF differs, to restart it.
func TestOCIErrorNamesTheServiceConfig(t *testing.T) {
	podmanTest(t)
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	nrOpen, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\"]\n[engine]\nruntime = \"runc\"\n", nrOpen+1, nrOpen+1)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CONTAINERS_CONF", conf)
	uri := "unix://" + filepath.Join(dir, "p.sock")
	e, err := Connect(testCtx(t), Options{URI: uri, StartService: true, LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	svc := e.Service()
	if svc == nil {
		t.Fatal("no service was started")
	}
	t.Cleanup(func() { syscall.Kill(svc.PID, syscall.SIGTERM) })

	serviceLine := func(e *Engine) string {
		t.Helper()
		err := startOn(t, e, func(*specgen.SpecGenerator) {})
		var he *HintError
		if !errors.As(err, &he) || he.Hint != hintRlimit {
			t.Fatalf("start: %v, want the rlimit hint", err)
		}
		if !strings.Contains(err.Error(), "\n  service: "+he.Service) {
			t.Errorf("the service line is not in the message:\n%v", err)
		}
		return he.Service
	}
	same := serviceLine(e)
	for _, w := range []string{uri, fmt.Sprintf("(pid %d)", svc.PID), "CONTAINERS_CONF=" + conf, fmt.Sprintf("kill %d", svc.PID)} {
		if !strings.Contains(same, w) {
			t.Errorf("service line lacks %q: %s", w, same)
		}
	}
	// A stemctl whose shell has no CONTAINERS_CONF talks to it.
	other, err := Connect(testCtx(t), Options{URI: uri, Getenv: func(k string) string {
		if k == "CONTAINERS_CONF" {
			return ""
		}
		return os.Getenv(k)
	}})
	if err != nil {
		t.Fatal(err)
	}
	diff := serviceLine(other)
	if !strings.Contains(diff, "not your CONTAINERS_CONF unset") || !strings.Contains(diff, fmt.Sprintf("kill %d", svc.PID)) {
		t.Errorf("a caller with another CONTAINERS_CONF is not told to restart the service: %s", diff)
	}
	// Errors that are no configuration matter carry no service line.
	if err := e.withServiceNote(ExplainError(fmt.Errorf("image x: %w", engine.ErrNotFound))); strings.Contains(err.Error(), "service:") {
		t.Errorf("an image error got a service line: %v", err)
	}
}

// Rename renames a running container; its id and hostname stay.
func TestRenameRunning(t *testing.T) {
	podmanTest(t)
	spec := sleeper(map[string]string{"io.stem.test.run": runID})
	id := create(t, spec)
	if err := testEng.Start(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	rn := testEng
	name := spec.Name + "-renamed"
	if err := rn.Rename(testCtx(t), id, name); err != nil {
		t.Fatalf("rename: %v", err)
	}
	c, err := testEng.Inspect(testCtx(t), name)
	if err != nil || c.ID != id || !c.Running {
		t.Fatalf("inspect by the new name: %+v %v", c, err)
	}
	if _, err := testEng.Inspect(testCtx(t), spec.Name); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the old name still answers: %v", err)
	}
	code, out, _ := execOut(t, id, engine.ExecSpec{Cmd: []string{"cat", "/proc/sys/kernel/hostname"}})
	if code != 0 || strings.TrimSpace(out) != id[:12] {
		t.Fatalf("hostname after rename: %q (exit %d)", out, code)
	}
	if err := rn.Rename(testCtx(t), strings.Repeat("f", 64), "x"+name); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("rename of a missing container: %v", err)
	}
}
