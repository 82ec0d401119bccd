package mcpserver

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func nonblocking(t *testing.T, fd int) bool {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.O_NONBLOCK != 0
}

// pollable reports whether the runtime's poller waits on f: only then
// does it take a read deadline.
func pollable(f *os.File) bool {
	err := f.SetReadDeadline(time.Now().Add(time.Hour))
	f.SetReadDeadline(time.Time{})
	return !errors.Is(err, os.ErrNoDeadline)
}

// readAll reads r to its end, which must come.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A stdin pipe in blocking mode (what a parent hands a child) is read
// through the poller, on a description of its own: the parent's (and any
// other holder's) stays blocking. The control: the pipe as given is not
// pollable.
func TestPollableInputPipe(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil { // blocking
		t.Fatal(err)
	}
	fd := p[0]
	w := os.NewFile(uintptr(p[1]), "w")
	defer w.Close()
	given := os.NewFile(uintptr(fd), "stdin") // as os.Stdin is made
	defer given.Close()
	if pollable(given) {
		t.Fatal("control: a blocking pipe is pollable as it is")
	}
	in, done := pollableInput(given)
	defer done()
	f, ok := in.(*os.File)
	if !ok || f == given || !pollable(f) {
		t.Fatalf("the pipe is not read through the poller: %T %v", in, ok)
	}
	if nonblocking(t, fd) {
		t.Fatal("the given description was made non-blocking")
	}
	go func() { io.WriteString(w, "one\ntwo\n"); w.Close() }()
	if got := readAll(t, in); got != "one\ntwo\n" {
		t.Fatalf("read %q", got)
	}
}

// A stdin socket (what libuv, Node.js's child processes, hands a child)
// is read through the poller while served, and left blocking after.
func TestPollableInputSocket(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer peer.Close()
	given := os.NewFile(uintptr(fds[0]), "stdin")
	defer given.Close()
	if pollable(given) {
		t.Fatal("control: a blocking socket is pollable as it is")
	}
	in, done := pollableInput(given)
	f, ok := in.(*os.File)
	if !ok || f == given || !pollable(f) {
		t.Fatalf("the socket is not read through the poller: %T %v", in, ok)
	}
	go func() { io.WriteString(peer, "one\n"); unix.Shutdown(fds[1], unix.SHUT_WR) }()
	if got := readAll(t, in); got != "one\n" {
		t.Fatalf("read %q", got)
	}
	done()
	if nonblocking(t, fds[0]) {
		t.Fatal("the socket was left non-blocking")
	}
	if _, err := io.WriteString(given, "x"); err != nil {
		t.Fatalf("done closed the given socket: %v", err)
	}
}

// What is not a pipe or a socket is read as it is.
func TestPollableInputOther(t *testing.T) {
	sr := strings.NewReader("x")
	if in, done := pollableInput(sr); in != io.Reader(sr) {
		t.Fatalf("a reader became %T", in)
	} else {
		done()
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in, done := pollableInput(f); in != io.Reader(f) {
		t.Fatalf("%s became %T", os.DevNull, in)
	} else {
		done()
	}
}
