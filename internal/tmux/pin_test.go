package tmux_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// TestDialRefusesSymlinkedSocket: t.sock sits in a directory the
// container can write. A symlink renamed over it, pointing at another
// live server (one on the host), must not get a client attached there.
func TestDialRefusesSymlinkedSocket(t *testing.T) {
	host := tmuxtest.Start(t) // the server the link points at
	dir := t.TempDir()
	link := filepath.Join(dir, "t.sock")
	if err := os.Symlink(host.Socket, link); err != nil {
		t.Fatal(err)
	}
	err := dialErr(t, tmux.Options{Socket: link})
	if !errors.Is(err, unixpin.ErrSymlink) {
		t.Fatalf("Dial through a symlink: %v, want unixpin.ErrSymlink", err)
	}
	if got := host.Tmux(t, "list-clients", "-F", "#{client_name}"); strings.TrimSpace(got) != "" {
		t.Fatalf("the server behind the link got clients: %q", got)
	}
	// DialOrInside must not take the refusal for a missing host tmux and
	// try again another way.
	_, err = tmux.DialOrInside(testCtx(t, 10*time.Second), tmux.Options{Socket: link}, []string{"/nonexistent/inside"}, nil)
	if !errors.Is(err, unixpin.ErrSymlink) {
		t.Fatalf("DialOrInside through a symlink: %v, want unixpin.ErrSymlink", err)
	}
}

// TestDialSurvivesSwapAfterAttach: once attached, the client keeps its
// server even if t.sock is replaced by a link to another one.
func TestDialSurvivesSwapAfterAttach(t *testing.T) {
	s := tmuxtest.Start(t)
	other := tmuxtest.Start(t)
	c := s.Dial(t)
	defer c.Close()
	tmp := filepath.Join(filepath.Dir(s.Socket), "swap")
	if err := os.Symlink(other.Socket, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.Socket); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	panes, err := c.ListPanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(panes) == 0 {
		t.Fatal("no panes")
	}
	if got := other.Tmux(t, "list-clients", "-F", "#{client_name}"); strings.TrimSpace(got) != "" {
		t.Fatalf("the other server got clients: %q", got)
	}
}
