package e2e_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/testenv"
)

// TestHostileTmuxServerRunsNothingOnTheHost: code in the container stops
// the student's tmux server and serves t.sock itself, answering every
// client with the messages that make a tmux client run a program or
// write a file (the stand-in in internal/tmux/tmuxtest/hostile): MSG_SHELL,
// MSG_EXEC and MSG_LOCK each on its own, then all of them. For each, a
// plain host tmux client is shown to obey it (the control); then every
// host entry point of stem that talks to the instance's tmux must leave
// no canary on the host.
func TestHostileTmuxServerRunsNothingOnTheHost(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	// Selected before the attack, so that stem-mcp dials it.
	a.must(0, "mcp", "select", inst)
	var st struct {
		Record struct {
			SocketDir   string `json:"socket_dir"`
			ContainerID string `json:"container_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	sockDir, cid := st.Record.SocketDir, st.Record.ContainerID
	sock := filepath.Join(sockDir, "t.sock")
	hostDir := t.TempDir() // exists on the host only
	canary, written := filepath.Join(hostDir, "canary"), filepath.Join(hostDir, "written")

	// The attacker, inside the container: a script in the socket
	// directory (which the host sees at the same path) for MSG_SHELL, the
	// real server stopped, the stand-in on t.sock.
	hostile := filepath.Join(testenv.Binary(t, "hostiletmux", "./internal/tmux/tmuxtest/hostile/hostiletmux"), "hostiletmux")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "podman", "cp", hostile, cid+":/tmp/hostiletmux").CombinedOutput(); err != nil {
		t.Fatalf("podman cp: %v\n%s", err, out)
	}
	a.must(0, "exec", inst, "--", "sh", "-c", `printf '#!/bin/sh\ntouch %s\n' "$2" > "$1/shell.sh" && chmod +x "$1/shell.sh" && tmux -S "$1/t.sock" kill-server && while tmux -S "$1/t.sock" has-session 2>/dev/null; do sleep 0.05; done`, "sh", sockDir, canary)

	noCanary := func(what string) {
		t.Helper()
		// Errorf and clear, so that one run names every entry point that
		// obeys (on the code before the Go client: all of them).
		ents, _ := os.ReadDir(hostDir)
		for _, e := range ents {
			t.Errorf("%s ran a command or wrote a file on the host for the container's server (%s appeared)", what, e.Name())
			os.Remove(filepath.Join(hostDir, e.Name()))
		}
	}
	grantID, configDir := grantObserve(t, a)
	entryPoints := [][]string{
		{"list"},
		{"list", "--json"},
		{"status", inst},
		{"mcp", "select", inst},
		{"mcp", "status"},
		{"mcp", "call", "--level", "observe", "pane_list"},
		{"mcp", "call", "--level", "assist", "pane_list"},
		{"mcp", "call", "--level", "full", "pane_list"},
		{"debug", inst},
		{"agent", "start", "claude", "native-amd64", "demo", "hello", "1"},
		{"agent", "stop", "--all", "--timeout", "5s"},
	}
	stemctl := func(args ...string) {
		t.Helper()
		r, err := a.Run([]string{"PATH=" + fakeAgent(t) + ":" + a.Bin + ":" + os.Getenv("PATH")}, args...)
		if err != nil {
			t.Fatalf("stemctl %v: %v", args, err)
		}
		t.Logf("stemctl %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		noCanary("stemctl " + strings.Join(args, " "))
	}

	// Each message on its own (a client that stopped at the first one it
	// refused would otherwise meet only MSG_WRITE_OPEN), then all of them.
	// For each, the control: the host's own tmux client, as the issue
	// tried it, obeys the stand-in (list-sessions for MSG_SHELL and the
	// whole sequence, a control client for MSG_EXEC and MSG_LOCK).
	for _, c := range []struct{ sequence, control string }{
		{"shell", "list-sessions"},
		{"ready,exec,exited", "-C attach"},
		{"ready,lock", "-C attach"},
		{"", "list-sessions"},
	} {
		what := c.sequence
		if what == "" {
			what = "all"
		}
		exec.CommandContext(ctx, "podman", "exec", cid, "pkill", "-x", "hostiletmux").Run()
		args := []string{"exec", "-d", cid, "/tmp/hostiletmux", "-socket", sock,
			"-command", "touch " + canary, "-shell", filepath.Join(sockDir, "shell.sh"), "-write", written}
		if c.sequence != "" {
			args = append(args, "-sequence", c.sequence)
		}
		if out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput(); err != nil {
			t.Fatalf("start the stand-in (%s): %v\n%s", what, err, out)
		}
		waitFor(t, 20*time.Second, "the stand-in listening on t.sock ("+what+")", func() bool {
			c, err := unixpin.Dial(ctx, sock)
			if err != nil {
				return false
			}
			c.Close()
			return true
		})

		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		ctl := exec.CommandContext(cctx, "tmux", append([]string{"-S", sock}, strings.Fields(c.control)...)...)
		ctl.Env = append(os.Environ(), "TMUX=")
		ctl.Stdin = strings.NewReader("")
		// Its own process group: what the obedient client started (a
		// shell for MSG_SHELL) ends with it, not during the checks below.
		ctl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := ctl.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the control ("+what+"): a host tmux client obeyed the stand-in", func() bool {
			_, err := os.Stat(canary)
			return err == nil
		})
		syscall.Kill(-ctl.Process.Pid, syscall.SIGKILL)
		ccancel()
		ctl.Wait()
		os.Remove(canary)
		os.Remove(written) // the control wrote it too (MSG_WRITE_OPEN comes first)

		gate := exec.CommandContext(ctx, filepath.Join(a.Bin, "stem-mcp"), "gate", "--grant", grantID, "--config-dir", configDir)
		gate.Env = append(append([]string{}, a.Env...), "SSH_ORIGINAL_COMMAND=status", "SSH_CONNECTION=192.0.2.7 50022 192.0.2.1 22")
		out, _ := gate.CombinedOutput()
		t.Logf("%s: gate status:\n%s", what, out)
		noCanary("the gate's status (" + what + ")")
		for _, args := range entryPoints {
			stemctl(args...)
		}
	}
	// Last, as it re-creates the instance.
	stemctl("up", "native-amd64", "demo", "hello", "1")
}

// fakeAgent is a directory with a "claude" that waits: agent start gets
// as far as it can with it.
func fakeAgent(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "stem-fake-agent")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "claude"), []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// grantObserve makes an observe grant for a fresh key and returns its id
// and the account's config directory.
func grantObserve(t *testing.T, a *account) (id, configDir string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "teacher.pub")
	if err := os.WriteFile(key, ssh.MarshalAuthorizedKey(sp), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.must(0, "access", "grant", "--name", "teacher", "--key", key, "--level", "observe", "--json")
	var g struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &g); err != nil || g.ID == "" {
		t.Fatalf("grant: %v %s", err, r.Stdout)
	}
	return g.ID, filepath.Join(a.Base, "config")
}
