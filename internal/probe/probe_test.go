package probe_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/nvim/nvimtest"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
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

// TestNvimModifiedPinned: NvimModified lists a live nvim's unsaved
// buffers, reports a gone one as having none, and never connects through
// a symlink planted in place of n.sock: a plain listener at the link's
// target (the canary) sees no connection, while a plain connect through
// the same link (the control) does reach it.
func TestNvimModifiedPinned(t *testing.T) {
	if testing.Short() {
		t.Skip("needs nvim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nv := nvimtest.Start(t, nvimtest.Options{})
	nv.Exec(t, "enew | call setline(1, 'unsaved') | file \x1b]0;title\x07name.c")
	names, err := probe.NvimModified(ctx, nv.Socket)
	if err != nil || len(names) != 1 || names[0] != filepath.Join(nv.Dir, "name.c") && !strings.HasSuffix(names[0], "name.c") || strings.ContainsRune(names[0], 0x1b) {
		t.Fatalf("unsaved buffers of a live nvim: %q %v", names, err)
	}
	if names, err := probe.NvimModified(ctx, filepath.Join(t.TempDir(), "n.sock")); err != nil || names != nil {
		t.Fatalf("a gone nvim: %q %v", names, err)
	}

	host := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Each connection the listener accepts reports its first byte (0 if
	// none); accepts come in connect order.
	first := make(chan byte, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 1)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, _ := c.Read(b); n == 0 {
				b[0] = 0
			}
			first <- b[0]
			c.Close()
		}
	}()
	link := filepath.Join(t.TempDir(), "n.sock")
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.NvimModified(ctx, link); !errors.Is(err, unixpin.ErrSymlink) {
		t.Fatalf("through a symlink: %v, want unixpin.ErrSymlink", err)
	}
	// The control: a connect by path follows the link to the host socket.
	c, err := net.Dial("unix", link)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{'C'})
	defer c.Close()
	if b := <-first; b != 'C' {
		t.Fatalf("NvimModified connected to the socket behind the symlink (first byte %#x)", b)
	}
}
