package tmux_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest/hostile"
)

// hostileCase is one way a server tries to make its client act, and the
// real tmux client invocation that obeys it (the control).
type hostileCase struct {
	name     string
	sequence []string
	hostArgs []string // after "tmux -S SOCKET"
}

var hostileCases = []hostileCase{
	{"shell", []string{"shell"}, []string{"list-sessions"}},
	{"exec", []string{"ready", "exec", "exited"}, []string{"-C", "attach"}},
	{"lock", []string{"ready", "lock"}, []string{"-C", "attach"}},
	{"write", []string{"write", "ready"}, []string{"-C", "attach"}},
	{"all", nil, []string{"-C", "attach"}},
}

// startHostile serves the plan on a fresh socket; the canaries would be
// written by whoever obeys it: dir/canary by the command (MSG_EXEC,
// MSG_LOCK, MSG_SHELL's script) and dir/written by MSG_WRITE_OPEN.
func startHostile(t *testing.T, sequence []string) (socket, dir string) {
	t.Helper()
	dir = t.TempDir()
	sockDir, err := os.MkdirTemp("", "hostile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket = filepath.Join(sockDir, "t.sock")
	script := filepath.Join(sockDir, "shell.sh")
	canary := filepath.Join(dir, "canary")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+canary+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := hostile.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go hostile.Serve(ln, hostile.Plan{
		Command:   "touch " + canary,
		Shell:     script,
		WritePath: filepath.Join(dir, "written"),
		Sequence:  sequence,
	})
	return socket, dir
}

func canaries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestHostileServerMakesAHostTmuxClientObey is the control: the stand-in
// server does make the host's own tmux client run a command or write a
// file, for each message, so the tests below would catch a client that
// obeys.
func TestHostileServerMakesAHostTmuxClientObey(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the host's tmux (the control for the Go client's tests)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux on this host: the control needs a real tmux client")
	}
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			socket, dir := startHostile(t, c.sequence)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", socket}, c.hostArgs...)...)
			cmd.Env = append(os.Environ(), "TMUX=")
			cmd.Stdin = strings.NewReader("")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			for len(canaries(dir)) == 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("the host tmux client did not obey %v: no canary", c.sequence)
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
}

// TestGoClientObeysNothing: stem's client (Dial, Ping) against the same
// server runs nothing and writes nothing, and says the server is hostile.
func TestGoClientObeysNothing(t *testing.T) {
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			socket, dir := startHostile(t, c.sequence)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Both return only after the client's conversation has ended,
			// so anything it were to do would be done by now.
			cl, err := tmux.Dial(ctx, tmux.Options{Socket: socket})
			if err == nil {
				cl.Close()
				t.Fatalf("Dial to a hostile server succeeded")
			}
			t.Logf("Dial: %v", err)
			perr := tmux.Ping(ctx, socket)
			if perr == nil {
				t.Fatalf("Ping of a hostile server succeeded")
			}
			t.Logf("Ping: %v", perr)
			if got := canaries(dir); len(got) != 0 {
				t.Fatalf("the client obeyed the server: %v appeared", got)
			}
			for _, e := range []error{err, perr} {
				if !errors.Is(e, tmux.ErrProtocol) || !strings.Contains(e.Error(), "refused") {
					t.Errorf("error %v: want ErrProtocol saying it refused", e)
				}
			}
		})
	}
}

// TestGoClientVersionMismatch: a server of another protocol version is
// reported as such, which is what makes stem fall back to the
// container's own client.
func TestGoClientVersionMismatch(t *testing.T) {
	socket, _ := startHostile(t, []string{"version"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tmux.Dial(ctx, tmux.Options{Socket: socket}); !errors.Is(err, tmux.ErrVersionMismatch) {
		t.Errorf("Dial: %v, want ErrVersionMismatch", err)
	}
	if err := tmux.Ping(ctx, socket); !errors.Is(err, tmux.ErrVersionMismatch) {
		t.Errorf("Ping: %v, want ErrVersionMismatch", err)
	}
}
