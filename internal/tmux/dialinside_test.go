package tmux_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// DialOrInside uses the inside client only when the host's cannot serve
// (missing, or another version), and says so; other failures (no server)
// are returned as they are, without trying inside.
func TestDialOrInside(t *testing.T) {
	s := tmuxtest.Start(t)
	realTmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	calls := filepath.Join(dir, "inside-calls")
	inside := script("inside", "echo x >> "+calls+"\nexec "+realTmux+` "$@"`+"\n")
	oldHost := script("old-tmux", `[ "$1" = -V ] && { echo "tmux 0.9-old"; exit 0; }`+"\nexec "+realTmux+` "$@"`+"\n")
	insideCalls := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, host, socket, log string
		wantInside              int
		wantErr                 error
	}{
		{"host client works", realTmux, s.Socket, "", 0, nil},
		// One dial starts the client twice: tmux -V, then control mode.
		{"no host tmux", filepath.Join(dir, "no-such-tmux"), s.Socket, "no tmux client on this host", 2, nil},
		{"another version", oldHost, s.Socket, "tmux versions differ", 2, nil},
		{"no server", realTmux, filepath.Join(dir, "none.sock"), "", 0, tmux.ErrNoServer},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(calls)
			var logged []string
			logf := func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
			cl, err := tmux.DialOrInside(ctx, tmux.Options{Socket: c.socket, Command: []string{c.host}}, []string{inside}, logf)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				if _, err := cl.ListPanes(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := insideCalls(); n != c.wantInside {
				t.Errorf("inside client started %d times, want %d", n, c.wantInside)
			}
			if got := strings.Join(logged, "\n"); c.log == "" && got != "" || !strings.Contains(got, c.log) {
				t.Errorf("log %q, want %q", got, c.log)
			}
		})
	}
}
