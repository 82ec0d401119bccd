package imsg

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// pair is a connected unix socket pair.
func pair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestRoundTripAndDescriptors(t *testing.T) {
	a, b := pair(t)
	ca, cb := NewConn(a), NewConn(b)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := ca.Send(MsgIdentifyStdin, w, nil); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(MsgCommand, nil, PackArgv([]string{"has-session", "-t", "=x"})); err != nil {
		t.Fatal(err)
	}
	m, err := cb.Next()
	if err != nil || m.Type != MsgIdentifyStdin || m.PeerID != ProtocolVersion || len(m.Data) != 0 {
		t.Fatalf("first message %+v %v", m, err)
	}
	m, err = cb.Next()
	want := append([]byte{3, 0, 0, 0}, "has-session\x00-t\x00=x\x00"...)
	if err != nil || m.Type != MsgCommand || !bytes.Equal(m.Data, want) {
		t.Fatalf("second message %+v %v", m, err)
	}
	if _, err := Encode(MsgCommand, ProtocolVersion, false, make([]byte, MaxSize)); !errors.Is(err, ErrTooLong) {
		t.Errorf("oversized message: %v", err)
	}
}

// SendAll frames each message as Send would, in order, and sends nothing
// when one of them is too long.
func TestSendAll(t *testing.T) {
	a, b := pair(t)
	ca, cb := NewConn(a), NewConn(b)
	if err := ca.SendAll([]Out{{Type: MsgIdentifyFlags, Data: []byte{0, 0x20, 0, 0}}, {Type: MsgIdentifyDone}, {Type: MsgCommand, Data: PackArgv([]string{"ls"})}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint32{MsgIdentifyFlags, MsgIdentifyDone, MsgCommand} {
		m, err := cb.Next()
		if err != nil || m.Type != want || m.PeerID != ProtocolVersion {
			t.Fatalf("message %d: %+v %v, want type %d", i, m, err, want)
		}
	}
	if err := ca.SendAll([]Out{{Type: MsgIdentifyFlags}, {Type: MsgCommand, Data: make([]byte, MaxSize)}}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("a batch with an oversized message: %v", err)
	}
	a.Close()
	if m, err := cb.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after a refused batch the peer read %+v %v, want nothing", m, err)
	}
}

// FuzzNext: whatever bytes a peer sends, Next returns messages within
// tmux's limits or an error, never panics, and keeps at most two
// messages' worth of bytes.
func FuzzNext(f *testing.F) {
	hdr := func(typ uint32, n uint16) []byte {
		b, _ := Encode(typ, ProtocolVersion, false, make([]byte, int(n)))
		return b
	}
	f.Add(hdr(MsgExit, 4))
	f.Add(append(hdr(MsgReady, 0), hdr(MsgExec, 10)...))
	f.Add([]byte{0xcb, 0, 0, 0, 0xff, 0xff, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 3, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := pair(t)
		go func() {
			a.Write(in)
			a.Close()
		}()
		c := NewConn(b)
		for {
			m, err := c.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if len(m.Data) > MaxSize-HeaderSize {
				t.Fatalf("message of %d bytes", len(m.Data))
			}
			if len(c.buf) > 2*MaxSize {
				t.Fatalf("kept %d bytes", len(c.buf))
			}
		}
	})
}
