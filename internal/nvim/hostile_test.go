package nvim

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// syncBuffer is a log the hostile server and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHostile serves nvimtest.Hostile in mode on a fresh socket.
func startHostile(t *testing.T, mode string) (string, *syncBuffer) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "n.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	log := &syncBuffer{}
	go (&nvimtest.Hostile{Mode: mode, Log: log}).Serve(ln)
	return sock, log
}

// TestHugeClaimRefused: the five-byte reply that claims an array of 2³²−1
// elements is refused before anything is allocated for it; the client
// reports this Neovim as broken, and the process goes on (a client of
// another server works).
func TestHugeClaimRefused(t *testing.T) {
	sock, _ := startHostile(t, nvimtest.HostileHuge)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Dial(testCtx(t), sock, Options{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "array of 4294967295 elements") || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Dial of a server claiming 2^32-1 elements: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("allocated %d bytes for a five-byte reply", grew)
	}
	other, _ := startHostile(t, nvimtest.HostileText)
	c, err := Dial(testCtx(t), other, Options{})
	if err != nil {
		t.Fatalf("another server after the refusal: %v", err)
	}
	c.Close()
}

// TestHostileServerText: a server's request and notification (method
// names full of escapes) are not answered and not logged raw, and the
// error text it answers with reaches the caller as one clean line.
func TestHostileServerText(t *testing.T) {
	sock, srvLog := startHostile(t, nvimtest.HostileText)
	var logged syncBuffer
	c, err := Dial(testCtx(t), sock, Options{Logf: func(format string, args ...any) {
		fmt.Fprintf(&logged, format+"\n", args...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Mode(testCtx(t))
	var se *ServerError
	if !errors.As(err, &se) || strings.ContainsAny(err.Error(), "\x1b\x07\n") || strings.ContainsRune(err.Error(), 0x9b) || !strings.Contains(err.Error(), nvimtest.EvilVisible) {
		t.Fatalf("the server's error: %T %q", err, err)
	}
	c.Close()
	for !strings.Contains(srvLog.String(), "closed") {
		runtime.Gosched()
	}
	if strings.Contains(srvLog.String(), "kind 1") {
		t.Fatalf("the client answered the server's request:\n%s", srvLog)
	}
	if strings.ContainsAny(logged.String(), "\x1b\x07") {
		t.Fatalf("go-client logged the server's text raw: %q", logged.String())
	}
}
