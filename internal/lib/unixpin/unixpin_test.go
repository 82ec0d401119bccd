package unixpin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

// listen serves one line naming who answered on every connection.
func listen(t *testing.T, path, name string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, name)
			c.Close()
		}
	}()
}

func who(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDialReachesTheSocket(t *testing.T) {
	dir := t.TempDir()
	listen(t, filepath.Join(dir, "t.sock"), "ours")
	c, err := Dial(context.Background(), filepath.Join(dir, "t.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if got := who(t, c); got != "ours" {
		t.Fatalf("answered by %q", got)
	}
}

func TestRefusesSymlinkAndOtherFiles(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "host.sock")
	listen(t, other, "host")
	link := filepath.Join(dir, "t.sock")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), link); !errors.Is(err, ErrSymlink) {
		t.Fatalf("symlink to a live socket: got %v, want ErrSymlink", err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	if _, err := Dial(context.Background(), plain); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("regular file: got %v, want ErrNotSocket", err)
	}
	if _, err := Dial(context.Background(), filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: got %v, want ErrNotExist", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "d")); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("directory: got %v, want ErrNotSocket", err)
	}
}

// TestSwapAfterOpenCannotRedirect is the race the package exists for: the
// path is replaced by a symlink to another live socket after the check;
// the connect still reaches the socket that was opened.
func TestSwapAfterOpenCannotRedirect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.sock")
	listen(t, path, "ours")
	other := filepath.Join(dir, "host.sock")
	listen(t, other, "host")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tmp := filepath.Join(dir, "swap")
	if err := os.Symlink(other, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("unix", s.Path(), time.Second)
	if err != nil {
		// The original socket file is gone (renamed over), but its inode
		// is still the listener's: connecting through the descriptor must
		// reach it, not the symlink's target.
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("connect through the descriptor refused: %v", err)
		}
		t.Fatal(err)
	}
	if got := who(t, c); got != "ours" {
		t.Fatalf("after the swap the connect reached %q, want ours", got)
	}
}

// TestChildGetsTheSocket: a child handed File() as its first extra file
// connects through ChildPath (how the tmux client is started). The child
// is this test binary again (see TestMain).
func TestChildGetsTheSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.sock")
	listen(t, path, "ours")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = []*os.File{s.File()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "ours" {
		t.Fatalf("child reached %q", got)
	}
}

const childEnv = "UNIXPIN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		c, err := net.Dial("unix", ChildPath)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		b, _ := io.ReadAll(c)
		fmt.Println(string(b))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDirectorySwapCannotRedirect: the container renames its whole socket
// directory (it can write the instance directory above it) and puts a
// symlink to another directory with a t.sock (another instance's, or a
// host tmux's) in its place, as fast as it can. No connect may reach the
// other server; a plain connect by path does (the control).
func TestDirectorySwapCannotRedirect(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "0123456789ab"), filepath.Join(base, "other")
	os.Mkdir(dir, 0o700)
	os.Mkdir(other, 0o700)
	listen(t, filepath.Join(dir, "t.sock"), "ours")
	listen(t, filepath.Join(other, "t.sock"), "host")
	stop := swaptest.Swap(t, dir, other)
	path := filepath.Join(dir, "t.sock")
	var ours, refused, control int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		c, err := Dial(context.Background(), path)
		if err != nil {
			if !errors.Is(err, ErrSymlink) && !errors.Is(err, os.ErrNotExist) {
				stop()
				t.Fatalf("refused with %v, want ErrSymlink", err)
			}
			refused++
		} else if got := who(t, c); got != "ours" {
			stop()
			t.Fatalf("the connect reached %q through the swapped directory", got)
		} else {
			ours++
		}
		if c, err := net.Dial("unix", path); err == nil && who(t, c) == "host" {
			control++
		}
	}
	stop()
	t.Logf("%d reached ours, %d refused; a plain connect reached the other server %d times", ours, refused, control)
	if ours == 0 || refused == 0 || control == 0 {
		t.Errorf("the race did not happen (%d ours, %d refused, control %d)", ours, refused, control)
	}
}
