package unixpin

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Gone opens t.sock without following a symlink: with t.sock replaced
// by a link to a host socket, it connects nowhere (the host listener, the
// canary, sees no connection; a plain connect through the link, the
// control, reaches it) and counts the server as gone.
func TestGoneDoesNotFollowSymlinks(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "t.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if Gone(live) {
		t.Fatal("a listening socket counted as gone")
	}
	if !Gone(filepath.Join(dir, "missing.sock")) {
		t.Fatal("a missing socket counted as present")
	}

	host := filepath.Join(t.TempDir(), "host.sock")
	hl, err := net.Listen("unix", host)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	first := make(chan byte, 10)
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			b := []byte{0}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			c.Read(b)
			first <- b[0]
			c.Close()
		}
	}()
	sdir := t.TempDir()
	link := filepath.Join(sdir, "t.sock")
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}
	if !Gone(link) {
		t.Fatal("t.sock replaced by a symlink counted as a live server")
	}
	c, err := net.Dial("unix", link) // the control: by path, the link is followed
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{'C'})
	defer c.Close()
	if b := <-first; b != 'C' {
		t.Fatal("Gone connected to the socket behind the symlink")
	}
}
