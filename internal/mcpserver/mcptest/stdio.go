package mcptest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/xdg"
)

// Stdio is a session of stem-mcp's own stdio transport (ServeStdio) on
// pipes, spoken to in raw JSON-RPC lines: the server's whole work for a
// request (parsing, dispatch, verification, policy, the tool, the
// encoding) on the harness's fakes, with no process or client library.
type Stdio struct {
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

// Stdio starts a second server at level on h's instance, serving stdio on
// pipes, and initializes it. It ends with the test.
func (h *Harness) Stdio(t testing.TB, level mcpserver.Level) *Stdio {
	t.Helper()
	in := h.Instance
	s, err := mcpserver.New(mcpserver.Options{
		Level: level, Identity: mcpserver.Identity{Account: "mcptest"},
		Getenv: func(string) string { return "" }, ErrOut: lockedWriter{h},
		Inspector: h.Engine,
		Dirs:      &xdg.Dirs{Runtime: in.Dirs.Runtime, State: in.Dirs.State, Config: in.Dirs.Config, Home: in.Dirs.Home},
		Connect:   h.connect,
	})
	if err != nil {
		t.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), sr, sw); sw.Close() }()
	c := &Stdio{in: cw, out: bufio.NewReaderSize(cr, 1<<20)}
	t.Cleanup(func() {
		cw.Close()
		go io.Copy(io.Discard, cr) // the session's last writes, if any
		<-done
		s.Close()
	})
	if _, err := c.RoundTrip(`"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcptest","version":"1"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(cw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// RoundTrip sends one request (the fields after jsonrpc and id) and
// returns the line of its response (notifications before it are skipped).
func (c *Stdio) RoundTrip(fields string) (string, error) {
	c.id++
	id := fmt.Sprintf(`"id":%d`, c.id)
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0",`+id+`,`+fields+"}\n"); err != nil {
		return "", err
	}
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("read the response: %w", err)
		}
		if strings.Contains(line, id+",") || strings.Contains(line, id+"}") {
			return line, nil
		}
	}
}
