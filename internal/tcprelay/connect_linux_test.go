package tcprelay

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangingAddr is a loopback address whose connects hang: a listener with
// backlog 0 that never accepts, its queue filled, drops further SYNs.
func hangingAddr(t *testing.T) (string, string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	for i := 0; i < 16; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 300*time.Millisecond)
		if err != nil {
			return "127.0.0.1", port
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("connects to a full backlog-0 listener do not hang here")
	return "", ""
}

// ssh closing its end while the connect is still under way (it gave up, or
// was killed without the SIGHUP it normally sends) ends the connect at
// once instead of after DialTimeout.
func TestSSHGoneDuringConnect(t *testing.T) {
	host, port := hangingAddr(t)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), host, port, pr, io.Discard) }()
	// ssh writes its version line while the connect hangs (the pipe's
	// write returns once the relay has read it); then ssh goes.
	wrote := make(chan struct{})
	go func() { pw.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); close(wrote) }()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("connect did not hang (%v): the test proves nothing", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never read ssh's version line")
	}
	select {
	case err := <-done:
		t.Fatalf("connect did not hang (%v): the test proves nothing", err)
	default:
	}
	pw.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connect to 127.0.0.1:"+port+": ssh closed its end") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connect went on after ssh closed its end")
	}
}
