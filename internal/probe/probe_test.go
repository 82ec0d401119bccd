package probe_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
	"github.com/stem-edu/stem/internal/unixpin"
)

// TestProbesAnswerAndRefuseSymlinks: both probes report a live server,
// and report one reached only through a symlink (planted in the socket
// directory from the container) as not the instance's.
func TestProbesAnswerAndRefuseSymlinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tm := tmuxtest.Start(t)
	nv := nvimtest.Start(t, nvimtest.Options{})
	if err := probe.Tmux(ctx, tm.Socket); err != nil {
		t.Fatalf("tmux probe of a live server: %v", err)
	}
	if err := probe.Nvim(ctx, nv.Socket); err != nil {
		t.Fatalf("nvim probe of a live server: %v", err)
	}
	dir := t.TempDir()
	for name, target := range map[string]string{"t.sock": tm.Socket, "n.sock": nv.Socket} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := probe.Tmux(ctx, filepath.Join(dir, "t.sock")); !errors.Is(err, unixpin.ErrSymlink) {
		t.Errorf("tmux probe through a symlink: %v, want unixpin.ErrSymlink", err)
	}
	if err := probe.Nvim(ctx, filepath.Join(dir, "n.sock")); !errors.Is(err, unixpin.ErrSymlink) {
		t.Errorf("nvim probe through a symlink: %v, want unixpin.ErrSymlink", err)
	}
	if err := probe.Tmux(ctx, filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tmux probe of a missing socket: %v, want ErrNotExist", err)
	}
}
