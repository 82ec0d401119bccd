package nvimtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/neovim/go-client/msgpack"
)

// Evil is text a hostile server puts wherever a client might print it: a
// window title, a screen clear, colours around a spoofed verdict, an OSC 52
// clipboard write, a line break and an 8-bit CSI.
const Evil = "\x1b]0;pwned\x07\x1b[2J\x1b[32m" + EvilVisible + "\x1b[0m\x1b]52;c;ZXZpbA==\x07\n\u009b2J"

// EvilVisible is the part of Evil that survives sanitizing.
const EvilVisible = "all checks passed"

// Modes of a Hostile server.
const (
	// HostileHuge answers every request with `94 01 <id> dd ff ff ff ff`:
	// an error value claiming an array of 2³²−1 elements.
	HostileHuge = "huge"
	// HostileText greets each connection with a request (id 77) and a
	// notification whose method is Evil, answers nvim_get_api_info as
	// Neovim 0.7 would, and every other request with the error Evil.
	HostileText = "text"
)

// Hostile is a msgpack-RPC server that stands in for a Neovim taken over
// by whatever runs in the container. It logs what each client sends, one
// line each: "conn N kind K method M" (kind 0 request, 1 reply, 2
// notification), then "conn N closed".
type Hostile struct {
	Mode string
	Log  io.Writer

	mu    sync.Mutex
	conns int
}

// Serve accepts connections on ln until it is closed.
func (h *Hostile) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.conns++
		n := h.conns
		h.mu.Unlock()
		go h.serve(c, n)
	}
}

func (h *Hostile) logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Log != nil {
		fmt.Fprintf(h.Log, format+"\n", args...)
	}
}

func (h *Hostile) serve(c net.Conn, n int) {
	defer func() {
		c.Close()
		h.logf("conn %d closed", n)
	}()
	if h.Mode == HostileText {
		c.Write(pack([]any{0, 77, Evil, []any{}}))
		c.Write(pack([]any{2, Evil, []any{Evil}}))
	}
	dec := msgpack.NewDecoder(c)
	for {
		var msg []any
		if err := dec.Decode(&msg); err != nil || len(msg) < 3 {
			return
		}
		kind, _ := asUint(msg[0])
		method := ""
		if kind == 0 && len(msg) == 4 {
			method, _ = msg[2].(string)
		}
		h.logf("conn %d kind %d method %s", n, kind, method)
		if kind != 0 || len(msg) != 4 {
			continue
		}
		id, _ := asUint(msg[1])
		switch {
		case h.Mode == HostileHuge:
			c.Write(append(packUint(id), 0xdd, 0xff, 0xff, 0xff, 0xff))
		case method == "nvim_get_api_info":
			c.Write(pack([]any{1, id, nil, []any{1, map[string]any{"version": map[string]any{"api_level": 9, "major": 0, "minor": 7, "patch": 2}}}}))
		default:
			c.Write(pack([]any{1, id, []any{0, Evil}, nil}))
		}
	}
}

// packUint is the start of a reply to id: 94 01 <id>.
func packUint(id uint64) []byte {
	p := pack([]any{1, id})
	p[0] = 0x94 // a 4-element array: the error value and result follow
	return p
}

func pack(v any) []byte {
	var b bytes.Buffer
	if err := msgpack.NewEncoder(&b).Encode(v); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func asUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint64:
		return x, true
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}
