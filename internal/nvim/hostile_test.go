package nvim

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/neovim/go-client/msgpack"
)

// evil is text a hostile server puts where stem might print it: a window
// title, a screen clear, colours and an OSC 52 clipboard write.
const evil = "\x1b]0;pwned\x07\x1b[2J\x1b[32mall checks passed\x1b[0m\x1b]52;c;ZXZpbA==\x07\n\u009b2J"

// fakeServer is a msgpack-RPC server on a unix socket that answers each
// request with answer(method, id), after sending the frames of greet to
// every new connection. It records the kind of every message a client
// sends (0 request, 1 reply, 2 notification).
type fakeServer struct {
	Socket string
	mu     sync.Mutex
	kinds  []uint64
	done   chan struct{}
}

func startFake(t *testing.T, greet []byte, answer func(method string, id uint64) []byte) *fakeServer {
	t.Helper()
	f := &fakeServer{Socket: filepath.Join(t.TempDir(), "n.sock"), done: make(chan struct{}, 10)}
	ln, err := net.Listen("unix", f.Socket)
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
			go f.serve(c, greet, answer)
		}
	}()
	return f
}

func (f *fakeServer) serve(c net.Conn, greet []byte, answer func(string, uint64) []byte) {
	defer func() { c.Close(); f.done <- struct{}{} }()
	c.Write(greet)
	dec := msgpack.NewDecoder(c)
	for {
		var msg []any
		if err := dec.Decode(&msg); err != nil {
			return
		}
		kind, _ := msg[0].(uint64)
		if i, ok := msg[0].(int64); ok {
			kind = uint64(i)
		}
		f.mu.Lock()
		f.kinds = append(f.kinds, kind)
		f.mu.Unlock()
		if kind != 0 || len(msg) != 4 {
			continue
		}
		id, _ := msg[1].(uint64)
		if i, ok := msg[1].(int64); ok {
			id = uint64(i)
		}
		method, _ := msg[2].(string)
		c.Write(answer(method, id))
	}
}

func pack(t testing.TB, v any) []byte {
	var b bytes.Buffer
	if err := msgpack.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// apiInfo is enough of nvim_get_api_info for Dial's version check.
func apiInfo(t testing.TB, id uint64) []byte {
	return pack(t, []any{1, id, nil, []any{1, map[string]any{"version": map[string]any{"api_level": 9, "major": 0, "minor": 7, "patch": 2}}}})
}

// TestHugeClaimRefused: the five-byte reply that claims an array of 2³²−1
// elements is refused before anything is allocated for it; the client
// reports this Neovim as broken, and the process goes on (another client
// on a sound server works).
func TestHugeClaimRefused(t *testing.T) {
	hostile := startFake(t, nil, func(_ string, id uint64) []byte {
		return []byte{0x94, 0x01, byte(id), 0xdd, 0xff, 0xff, 0xff, 0xff}
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Dial(testCtx(t), hostile.Socket, Options{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "array of 4294967295 elements") || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Dial of a server claiming 2^32-1 elements: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("allocated %d bytes for a five-byte reply", grew)
	}
	sound := startFake(t, nil, func(method string, id uint64) []byte {
		if method == "nvim_get_api_info" {
			return apiInfo(t, id)
		}
		return pack(t, []any{1, id, nil, map[string]any{"mode": "n", "blocking": false}})
	})
	c, err := Dial(testCtx(t), sound.Socket, Options{})
	if err != nil {
		t.Fatalf("another server after the refusal: %v", err)
	}
	defer c.Close()
	if m, err := c.Mode(testCtx(t)); err != nil || m.Mode != "n" {
		t.Fatalf("Mode: %v %v", m, err)
	}
}

// TestHostileServerText: a server's requests and notifications (method
// names full of escapes) are not answered and not logged raw, and the
// error text it answers with reaches the caller as one clean line.
func TestHostileServerText(t *testing.T) {
	greet := append(pack(t, []any{0, 77, evil, []any{}}), pack(t, []any{2, evil, []any{evil}})...)
	srv := startFake(t, greet, func(method string, id uint64) []byte {
		if method == "nvim_get_api_info" {
			return apiInfo(t, id)
		}
		return pack(t, []any{1, id, []any{0, evil}, nil})
	})
	var logged strings.Builder
	var logMu sync.Mutex
	c, err := Dial(testCtx(t), srv.Socket, Options{Logf: func(format string, args ...any) {
		logMu.Lock()
		fmt.Fprintf(&logged, format+"\n", args...)
		logMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Mode(testCtx(t))
	var se *ServerError
	if !errors.As(err, &se) || strings.ContainsAny(err.Error(), "\x1b\x07\n") || strings.ContainsRune(err.Error(), 0x9b) || !strings.Contains(err.Error(), "all checks passed") {
		t.Fatalf("the server's error: %T %q", err, err)
	}
	c.Close()
	<-srv.done
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, k := range srv.kinds {
		if k != 0 {
			t.Fatalf("the client answered the server (kinds sent: %v)", srv.kinds)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.ContainsAny(logged.String(), "\x1b\x07") {
		t.Fatalf("go-client logged the server's text raw: %q", logged.String())
	}
}
