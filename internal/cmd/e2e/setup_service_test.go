package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
)

// environOf reads one variable of a process's environment.
func environOf(t *testing.T, pid int, name string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok && string(k) == name {
			return string(v), true
		}
	}
	return "", false
}

// scripts/setup.sh keeps a Podman API service only if it runs with the
// CONTAINERS_CONF this host needs (.cache/podman.env): one started without
// it (as stemctl does from a plain shell), or with a file that is gone, is
// restarted; a right one is left alone, so running setup again changes
// nothing.
func TestSetupRestartsAServiceWithTheWrongConfig(t *testing.T) {
	testenv.Require(t, "podman", "bash")
	root := testenv.RepoRoot()
	envFile, err := os.ReadFile(filepath.Join(root, ".cache", "podman.env"))
	want := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(envFile)), "export CONTAINERS_CONF="))
	needs := err == nil && want != ""
	dir, err := os.MkdirTemp("/tmp", "ps")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONTAINERS_CONF=") && !strings.HasPrefix(kv, "CONTAINER_HOST=") {
			base = append(base, kv)
		}
	}
	// serve starts a service on sock by hand with conf ("" = none).
	serve := func(conf string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
		cmd.Env = base
		if conf != "" {
			cmd.Env = append(append([]string{}, base...), "CONTAINERS_CONF="+conf)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() // reaped as soon as it ends
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case <-done:
				t.Fatalf("the hand-started service (CONTAINERS_CONF=%q) exited", conf)
			default:
			}
			if _, err := os.Stat(sock); err == nil {
				if listenerPID(t, sock) == cmd.Process.Pid {
					return cmd
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the hand-started service does not answer")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setup := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "setup.sh"), "--podman-service")
		cmd.Env = append(append([]string{}, base...), "STEM_PODMAN_SOCKET="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("setup.sh --podman-service: %v\n%s", err, out)
		}
		return string(out)
	}
	started := 0
	t.Cleanup(func() {
		if started != 0 {
			syscall.Kill(started, syscall.SIGTERM)
		}
	})
	check := func(old *exec.Cmd, why string) {
		t.Helper()
		out := setup()
		if !strings.Contains(out, fmt.Sprintf("restarting the Podman API service on %s (pid %d): %s", sock, old.Process.Pid, why)) {
			t.Fatalf("setup did not restart the service (%s):\n%s", why, out)
		}
		waitFor(t, 10*time.Second, "the old service ended and reaped", func() bool {
			return syscall.Kill(old.Process.Pid, 0) != nil
		})
		pid := listenerPID(t, sock)
		started = pid
		if pid == old.Process.Pid {
			t.Fatal("the same service still listens")
		}
		got, set := environOf(t, pid, "CONTAINERS_CONF")
		if needs && (!set || got != want) {
			t.Fatalf("the new service runs with CONTAINERS_CONF=%q (set %v), want %q", got, set, want)
		}
		// Again: nothing to do.
		out = setup()
		if !strings.Contains(out, "the Podman API service on "+sock+" answers") || listenerPID(t, sock) != pid {
			t.Fatalf("a second setup did not keep the service:\n%s", out)
		}
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		started = 0
		os.Remove(sock)
	}
	if needs {
		check(serve(""), "it runs with no CONTAINERS_CONF, this host needs CONTAINERS_CONF="+want)
	} else {
		t.Log("this host needs no containers.conf (.cache/podman.env is absent): only a service whose file is gone is restarted")
	}
	// A service started from a checkout since deleted: its file is gone.
	gone := filepath.Join(dir, "gone.conf")
	if err := os.WriteFile(gone, []byte("[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := serve(gone)
	os.Remove(gone)
	why := "its " + gone + " is gone"
	if needs {
		why = "it runs with CONTAINERS_CONF=" + gone + ", this host needs CONTAINERS_CONF=" + want
	}
	check(old, why)
}
