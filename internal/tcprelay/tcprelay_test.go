package tcprelay

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func listen(t *testing.T) (net.Listener, string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := l.Addr().(*net.TCPAddr)
	return l, "127.0.0.1", strconv.Itoa(a.Port)
}

// sshInput is ssh's end of the relay's input: data, then the end of it
// once started is closed. ssh ends that input only when it exits, which
// is never before the connection exists (an end before that means ssh is
// gone and stops the connect; TestSSHGoneDuringConnect).
func sshInput(t *testing.T, data []byte, started <-chan struct{}) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		pw.Write(data)
		<-started
		pw.Close()
	}()
	t.Cleanup(func() { pw.Close() })
	return pr
}

// Bytes go both ways unchanged; the end of ssh's input half-closes the
// connection, and the server's answer after that still arrives.
func TestCopiesBothWaysAndHalfCloses(t *testing.T) {
	l, host, port := listen(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	got := make(chan []byte, 1)
	started := make(chan struct{})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			return
		}
		close(started)
		b, _ := io.ReadAll(c) // until the relay's half-close
		b = append(first, b...)
		got <- b
		c.Write([]byte("reply after EOF:"))
		c.Write(b[:16])
	}()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Run(ctx, host, port, sshInput(t, big, started), &out); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("server got %d bytes, want %d", len(b), len(big))
	}
	if out.String() != "reply after EOF:0123456789abcdef" {
		t.Fatalf("relay wrote %q", out.String())
	}
}

// A refused connect says where and why, for IPv4 and IPv6 (ssh keeps its
// end open meanwhile: a pipe nobody writes to).
func TestRefusedConnectionSaysWhere(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		a := l.Addr().(*net.TCPAddr)
		l.Close()
		pr, pw := io.Pipe()
		err = Run(context.Background(), a.IP.String(), strconv.Itoa(a.Port), pr, io.Discard)
		pw.Close()
		if err == nil || !strings.Contains(err.Error(), "connect to "+a.String()) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("%s: err = %v", network, err)
		}
	}
}

// IPv6 literals connect (Run adds the brackets).
func TestIPv6(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatalf("listen on [::1]: %v", err)
	}
	defer l.Close()
	const hello = "SSH-2.0-x\r\n"
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, len(hello))
		io.ReadFull(c, b)
		c.Write(append([]byte("v6:"), b...))
	}()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Run(ctx, "::1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port), sshInput(t, []byte(hello), ctx.Done()), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "v6:"+hello {
		t.Fatalf("relay wrote %q", out.String())
	}
}

// Once ssh has closed its end, a server that neither answers nor closes
// gets CloseGrace, not forever: the relay does not outlive ssh.
func TestServerThatNeverClosesAfterSSHEnds(t *testing.T) {
	l, host, port := listen(t)
	started, gotEOF, end := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(end)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 64))
		close(started)
		io.Copy(io.Discard, c)
		close(gotEOF)
		<-end // neither answers nor closes while the test runs
	}()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), host, port, sshInput(t, []byte("SSH-2.0-x\r\n"), started), io.Discard)
	}()
	<-started
	ended := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(ended); d < CloseGrace-time.Second {
			t.Fatalf("returned %v after ssh's end, before the server had CloseGrace (%v)", d, CloseGrace)
		}
	case <-time.After(CloseGrace + 10*time.Second):
		t.Fatal("relay still running long after ssh closed its end")
	}
	select {
	case <-gotEOF:
	default:
		t.Fatal("server never saw the half-close")
	}
}

// A cancelled context ends a relay whose server never closes.
func TestContextEndsTheRelay(t *testing.T) {
	l, host, port := listen(t)
	accepted, end := make(chan struct{}), make(chan struct{})
	defer close(end)
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			close(accepted)
			<-end // never closes while the test runs
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, host, port, pr, io.Discard) }()
	select {
	case <-accepted: // the relay is connected
	case err := <-done:
		t.Fatalf("relay ended before the cancel: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("cancelled relay returned nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("relay did not end after cancel")
	}
}

// When ssh goes away (its end of the pipe closes), the relay stops at
// the next data instead of reading the server forever.
func TestStopsWhenSSHIsGone(t *testing.T) {
	l, host, port := listen(t)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for i := 0; i < 100; i++ {
			if _, err := c.Write([]byte("SSH-2.0-x\r\n")); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	pr, pw := io.Pipe()
	pr.Close()
	in, inw := io.Pipe() // ssh's stdout to us: still open
	defer inw.Close()
	err := Run(context.Background(), host, port, in, pw)
	if err == nil || !strings.Contains(err.Error(), "write to ssh") {
		t.Fatalf("err = %v", err)
	}
}
