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

// Bytes go both ways unchanged; the end of ssh's input half-closes the
// connection, and the server's answer after that still arrives.
func TestCopiesBothWaysAndHalfCloses(t *testing.T) {
	l, host, port := listen(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	got := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the relay's half-close
		got <- b
		c.Write([]byte("reply after EOF:"))
		c.Write(b[:16])
	}()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Run(ctx, host, port, bytes.NewReader(big), &out); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("server got %d bytes, want %d", len(b), len(big))
	}
	if out.String() != "reply after EOF:0123456789abcdef" {
		t.Fatalf("relay wrote %q", out.String())
	}
}

func TestRefusedConnectionSaysWhere(t *testing.T) {
	l, host, port := listen(t)
	l.Close()
	err := Run(context.Background(), host, port, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "connect to 127.0.0.1:"+port) {
		t.Fatalf("err = %v", err)
	}
}

// A cancelled context ends a relay whose server never closes.
func TestContextEndsTheRelay(t *testing.T) {
	l, host, port := listen(t)
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(time.Minute)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, host, port, pr, io.Discard) }()
	time.Sleep(100 * time.Millisecond)
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
	err := Run(context.Background(), host, port, strings.NewReader(""), pw)
	if err == nil || !strings.Contains(err.Error(), "write to ssh") {
		t.Fatalf("err = %v", err)
	}
}
