package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
)

// BenchmarkServerPaneCapture is the server's own share of a pane_capture:
// stem-mcp's stdio transport on pipes in this process, the instance's
// verification, registry, policy and consent files real, tmux a fake
// that answers from memory. ping is the transport and mcp-go alone; a CPU
// profile of this benchmark (-cpuprofile) is the server's work per call
// without tmux's or a process's.
func BenchmarkServerPaneCapture(b *testing.B) {
	h := mcptest.New(b, mcptest.Options{Level: mcpserver.Observe})
	lines := make([]string, 48)
	for i := range lines {
		lines[i] = strings.Repeat("x", 150)
	}
	h.Tmux.SetText("%1", lines...)
	c := h.Stdio(b, mcpserver.Observe)
	for _, bc := range []struct{ name, req string }{
		{"ping", `"method":"ping"`},
		{"capture", `"method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"%1"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range 50 {
				if _, err := c.RoundTrip(bc.req); err != nil {
					b.Fatal(err)
				}
			}
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				line, err := c.RoundTrip(bc.req)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
				if strings.Contains(line, `"isError":true`) || strings.Contains(line, `"error":{`) {
					b.Fatalf("error response: %.300s", line)
				}
			}
			report(b, samples)
		})
	}
}
