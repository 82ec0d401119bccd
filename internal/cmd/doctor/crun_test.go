package doctor_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// TestDoctorCrunRefusal: a Podman service whose runtime is crun, on this
// host's hybrid cgroup layout, cannot start containers; doctor's runtime
// check says so with the fix (runc), and nothing else of the account
// fails. The root account of TestDoctorAccounts, on the usual service,
// is the control.
func TestDoctorCrunRefusal(t *testing.T) {
	needs.Real(t, "Podman, crun and stem's images")
	needs.Root(t, "starts a rootful Podman service")
	crun := needs.Program(t, "crun", "crun")
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err != nil {
		t.Skip("the cgroup layout is not hybrid: crun runs here")
	}
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")

	dir, err := os.MkdirTemp("/tmp", "dr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=4096:4096\"]\n[engine]\nruntime = %q\n", crun)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "p.sock")
	svc := exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
	svc.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Process.Kill(); svc.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the private Podman service made no socket")
		case <-time.After(20 * time.Millisecond):
		}
	}

	a := testenv.NewAccount(t, bin, testenv.AccountOptions{Env: []string{"CONTAINER_HOST=unix://" + sock, "CONTAINERS_CONF=" + conf}})
	rep := doctorJSON(t, a, 1)
	c := check(t, rep, "runtime")
	if c.Status != doctor.Fail || !strings.Contains(c.Detail, "hybrid") || !strings.Contains(c.Fix, `runtime = "runc"`) {
		t.Errorf("runtime: %+v", c)
	}
	for _, c := range rep.Checks {
		if c.Required && c.Status == doctor.Fail && c.Name != "runtime" {
			t.Errorf("%s fails too: %s", c.Name, c.Detail)
		}
	}
	if c := check(t, rep, "podman-service"); !strings.Contains(c.Detail, sock) {
		t.Errorf("the service's socket is not named: %+v", c)
	}
}
