package hostterm

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// TestRelayOverAPty runs the relay on a real pseudo-terminal in raw mode,
// as stemctl attach does: keys written on the terminal side one at a time
// arrive as separate reads, the chord answers, other keys reach the
// container byte for byte, and the terminal gets the guarded stream.
func TestRelayOverAPty(t *testing.T) {
	t.Parallel()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	st, err := term.MakeRaw(int(slave.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer term.Restore(int(slave.Fd()), st)

	f := newFake()
	r := New(slave, Options{Line: true, Name: "demo-t1", Questions: f})
	r.rows, r.cols = 24, 40

	// The container: what the relay passes on, read by one goroutine.
	var mu sync.Mutex
	var container bytes.Buffer
	in := r.Input(slave)
	go func() {
		b := make([]byte, 1024)
		for {
			n, err := in.Read(b)
			mu.Lock()
			container.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	got := func() string { mu.Lock(); defer mu.Unlock(); return container.String() }
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (container got %q, answers %v)", what, got(), f.got())
			}
			time.Sleep(time.Millisecond)
		}
	}

	r.Output().Write([]byte("hi\x1b]52;c;eA==\x07\x1bPtmux;\x1b\x1b[21t\x1b\\!"))
	want := "hi!" + string(lineBytes("stem ▸ demo-t1", 24, 40))
	screen := make([]byte, len(want))
	if _, err := io.ReadFull(master, screen); err != nil || string(screen) != want {
		t.Fatalf("the terminal got %q (%v), want %q", screen, err, want)
	}

	pend(t, r, q1)
	for _, k := range []string{"a", "n", "d"} {
		master.Write([]byte(k))
		wait("the key "+k, func() bool { return bytes.HasSuffix([]byte(got()), []byte(k)) })
	}
	master.Write([]byte("\x1dy")) // one read: not the chord
	wait("the chord in one read passed on", func() bool { return got() == "and\x1dy" })
	master.Write([]byte{chordKey})
	wait("the chord armed", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.state == armed })
	master.Write([]byte("y"))
	wait("the answer", func() bool { return len(f.got()) == 1 })
	if a := f.got(); a[0] != "q1=yes" || got() != "and\x1dy" {
		t.Fatalf("answers %v, container %q", a, got())
	}
}
