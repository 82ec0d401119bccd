//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containers/podman/v5/pkg/specgen"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stem-edu/stem/internal/engine"
)

// The messages below were produced on a Debian 12 host with Podman 4.3.1
// (HOST-NOTES): crun 1.8.1 on the hybrid cgroup layout, runc 1.1.5 with the
// default ulimits above the hard nofile limit of 20000, the API service
// swapping soft and hard ulimits, and a runtime binary that cannot load.
func TestExplainErrorMessages(t *testing.T) {
	dialErr := func(errno syscall.Errno) error {
		return fmt.Errorf("connect to Podman: %w", &net.OpError{
			Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: "/run/user/1000/podman/podman.sock", Net: "unix"},
			Err: os.NewSyscallError("connect", errno),
		})
	}
	cases := []struct {
		name string
		err  error
		hint string // substring of the hint; "" = no hint
	}{
		{"crun hybrid cgroups", errors.New("OCI runtime error: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"), `runtime = "runc"`},
		{"runc rlimit EPERM", errors.New("runc: runc create failed: unable to start container process: error during container init: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted: OCI permission denied"), "default_ulimits"},
		{"runc rlimit EINVAL", errors.New("runc: runc create failed: unable to start container process: error during container init: error setting rlimits for ready process: error setting rlimit type 7: invalid argument: OCI runtime error"), "equal soft and hard"},
		{"runtime cannot run", errors.New("/usr/bin/crun: error while loading shared libraries: libyajl.so.2: cannot open shared object file: No such file or directory: OCI runtime attempted to invoke a command that was not found"), "install runc or crun"},
		{"image", errors.New("localhost/stem-rp2350:latest: image not known"), "make images"},
		{"image not found", fmt.Errorf("image x: %w", engine.ErrNotFound), "make images"},
		{"image: doctor", fmt.Errorf("image x: %w", engine.ErrNotFound), "`stemctl doctor` lists every image"},
		{"socket permission", dialErr(syscall.EACCES), "systemctl --user enable --now podman.socket"},
		{"socket missing", dialErr(syscall.ENOENT), "podman system service --time=0 unix:///run/user/1000/podman/podman.sock"},
		{"socket refused", dialErr(syscall.ECONNREFUSED), "podman system service --time=0 unix:///run/user/1000/podman/podman.sock"},
		{"bindings text", errors.New(`unable to connect to Podman socket: Get "http://d/v5.7.0/libpod/_ping": dial unix /run/podman/podman.sock: connect: no such file or directory`), "sudo systemctl enable --now podman.socket"},
		{"other", errors.New("something else"), ""},
		{"container not found", fmt.Errorf("container x: %w", engine.ErrNotFound), ""},
	}
	for _, c := range cases {
		got := ExplainError(c.err)
		var he *HintError
		isHint := errors.As(got, &he)
		switch {
		case c.hint == "" && got != c.err:
			t.Errorf("%s: ExplainError changed the error to %v", c.name, got)
		case c.hint != "" && (!isHint || !strings.Contains(he.Hint, c.hint)):
			t.Errorf("%s: ExplainError = %v, want a hint containing %q", c.name, got, c.hint)
		case c.hint != "" && !errors.Is(got, c.err):
			t.Errorf("%s: the explained error no longer wraps the original", c.name)
		case c.hint != "" && ExplainError(got) != got:
			t.Errorf("%s: explaining twice changed the error", c.name)
		}
	}
	if ExplainError(nil) != nil {
		t.Error("ExplainError(nil) != nil")
	}
}

// startWith creates a container from a spec generator tweaked by mutate and
// returns the error of starting it (Start applies ExplainError).
func startWith(t *testing.T, mutate func(*specgen.SpecGenerator)) error {
	t.Helper()
	return startOn(t, testEng, mutate)
}

func startOn(t *testing.T, e *Engine, mutate func(*specgen.SpecGenerator)) error {
	t.Helper()
	s, err := specGenerator(sleeper(nil))
	if err != nil {
		t.Fatal(err)
	}
	mutate(s)
	id, err := e.create(testCtx(t), s)
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := e.Remove(testCtx(t), id, true); err != nil {
			t.Errorf("cleanup: remove %s: %v", id, err)
		}
	})
	return e.Start(testCtx(t), id)
}

// TestExplainProvoked makes the service fail in the ways ExplainError knows
// and checks the real messages get their hints.
func TestExplainProvoked(t *testing.T) {
	podmanTest(t)
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	nrOpen, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("rlimit above what the kernel allows", func(t *testing.T) {
		// Above fs.nr_open setrlimit fails with EPERM even for root: the
		// same error as default ulimits above a hard limit.
		err := startWith(t, func(s *specgen.SpecGenerator) {
			s.Rlimits = []rspec.POSIXRlimit{{Type: "nofile", Soft: 1024, Hard: nrOpen + 1}}
		})
		t.Logf("%v", err)
		var he *HintError
		if !errors.As(err, &he) || he.Hint != hintRlimit {
			t.Errorf("start: %v, want the rlimit hint", err)
		}
	})
	t.Run("soft rlimit above hard", func(t *testing.T) {
		err := startWith(t, func(s *specgen.SpecGenerator) {
			s.Rlimits = []rspec.POSIXRlimit{{Type: "nofile", Soft: 2048, Hard: 1024}}
		})
		t.Logf("%v", err)
		var he *HintError
		if !errors.As(err, &he) || he.Hint != hintRlimitSwapped {
			t.Errorf("start: %v, want the swapped-rlimit hint", err)
		}
	})
	t.Run("runtime that cannot run", func(t *testing.T) {
		// The runtime is the service's setting, not the container's: start
		// a private service whose runtime is a file the kernel cannot execute.
		bad := filepath.Join(t.TempDir(), "runtime")
		if err := os.WriteFile(bad, []byte("not an executable\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		e := privateEngine(t, bad)
		err := startOn(t, e, func(*specgen.SpecGenerator) {})
		t.Logf("%v", err)
		var he *HintError
		if !errors.As(err, &he) || he.Hint != hintRuntimeMissing {
			t.Errorf("start: %v, want the missing-runtime hint", err)
		}
	})
	t.Run("crun on a hybrid cgroup layout", func(t *testing.T) {
		crun := os.Getenv("STEM_TEST_CRUN")
		if crun == "" {
			crun, _ = exec.LookPath("crun")
		}
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err != nil {
			t.Skip("the cgroup layout is not hybrid: crun runs here")
		}
		if crun == "" {
			// This host is one the hint is for: without crun the test
			// proves nothing, so only -short may pass over it.
			if testing.Short() {
				t.Skip("no crun here (set STEM_TEST_CRUN to a crun binary)")
			}
			t.Fatal("crun is not installed: apt-get install crun (or run `make setup`); STEM_TEST_CRUN may name a crun binary")
		}
		e := privateEngine(t, crun)
		err := startOn(t, e, func(*specgen.SpecGenerator) {})
		t.Logf("%v", err)
		var he *HintError
		if !errors.As(err, &he) || he.Hint != hintCrunCgroups {
			t.Errorf("start with %s: %v, want the crun hint", crun, err)
		}
	})
}

// privateEngine starts a Podman service of its own, on a private socket,
// whose containers.conf names runtime; the service is stopped at cleanup.
func privateEngine(t *testing.T, runtime string) *Engine {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=4096:4096\"]\n[engine]\nruntime = %q\n", runtime)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CONTAINERS_CONF", conf) // the service inherits it
	e, err := Connect(testCtx(t), Options{URI: "unix://" + filepath.Join(dir, "p.sock"), StartService: true, LogDir: dir})
	if err != nil {
		t.Fatalf("start a private service with runtime %s: %v", runtime, err)
	}
	if s := e.Service(); s != nil {
		t.Cleanup(func() {
			if p, err := os.FindProcess(s.PID); err == nil {
				_ = p.Signal(syscall.SIGTERM)
			}
		})
	}
	return e
}

func TestExplainMissingPodman(t *testing.T) {
	_, err := exec.Command("/nonexistent/podman").Output()
	wrapped := ExplainError(fmt.Errorf("start the Podman service (podman): %w", err))
	if !strings.Contains(wrapped.Error(), "apt-get install podman") {
		t.Fatalf("no install hint: %v", wrapped)
	}
	_, err = exec.LookPath("no-such-podman-binary")
	if w := ExplainError(fmt.Errorf("start the Podman service (podman): %w", err)); !strings.Contains(w.Error(), "make setup") {
		t.Fatalf("no install hint for a missing binary on PATH: %v", w)
	}
}
