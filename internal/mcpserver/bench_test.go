package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/tmux"
)

// report adds p50 and p99 of samples as benchmark metrics (in ms).
func report(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	pct := func(p float64) time.Duration { return samples[min(len(samples)-1, int(float64(len(samples))*p))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkColdStart measures process spawn to the initialize reply.
func BenchmarkColdStart(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	bin := stemMCP(b)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		c, err := client.NewStdioMCPClient(bin, in.Env, "serve", "--level", "observe")
		if err != nil {
			b.Fatal(err)
		}
		req := mcp.InitializeRequest{}
		req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.Initialize(ctx, req); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		cancel()
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
	report(b, samples)
}

func benchCalls(b *testing.B, s *session, name string, args map[string]any) {
	s.ok(name, args) // warm: connections made, caches filled
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		_, etext, err := s.call(name, args)
		if err != nil || etext != "" {
			b.Fatalf("%s: %v %s", name, err, etext)
		}
		samples = append(samples, time.Since(start))
	}
	report(b, samples)
}

// BenchmarkPaneCapture is a pane_capture round trip over stdio.
func BenchmarkPaneCapture(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	s := connect(b, in, "observe")
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	benchCalls(b, s, "pane_capture", map[string]any{"pane": pane})
}

// BenchmarkBufferRead1000 reads 1,000 lines of a buffer over stdio.
func BenchmarkBufferRead1000(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	var lines []string
	for i := 0; i < 1000; i++ {
		lines = append(lines, fmt.Sprintf("    x[%d] = compute(%d) + offset; /* line %d of the benchmark file */", i, i, i))
	}
	path := filepath.Join(in.Resolved.TaskDir, "bench.c")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	s := connect(b, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/bench.c"})
	benchCalls(b, s, "nvim_buffer_read", map[string]any{"path": "t1/bench.c", "start": 1, "end": 1000, "max_bytes": 262144})
}

// BenchmarkPaneWaitNotice measures how long after output appears in a pane
// pane_wait returns (the marker is printed by a shell after a known delay;
// the figure is the return time minus the moment the marker was written,
// which the shell reports with nanosecond time).
func BenchmarkPaneWaitNotice(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	s := connect(b, in, "observe")
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	stamp := filepath.Join(b.TempDir(), "stamp")
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		marker := fmt.Sprintf("wake-%d-%d", i, time.Now().UnixNano())
		// The shell sleeps, records the time, then prints the marker.
		cmd := fmt.Sprintf("sleep 0.2; date +%%s%%N > %s; echo %s", stamp, marker)
		in.Tmux(b, "send-keys", "-t", pane, "-l", cmd)
		in.Tmux(b, "send-keys", "-t", pane, "Enter")
		out := s.ok("pane_wait", map[string]any{"pane": pane, "pattern": "^" + marker + "$", "timeout_ms": 10000})
		returned := time.Now()
		if out["matched"] != true {
			b.Fatalf("pane_wait: %v", out)
		}
		data, err := os.ReadFile(stamp)
		if err != nil {
			b.Fatal(err)
		}
		var ns int64
		fmt.Sscan(strings.TrimSpace(string(data)), &ns)
		samples = append(samples, returned.Sub(time.Unix(0, ns)))
	}
	report(b, samples)
}

// rawClient speaks JSON-RPC lines to a stem-mcp process directly, so a
// latency figure is the server and the pipe, not a client library's parsing.
type rawClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func newRawClient(b *testing.B, in *testenv.Instance, level string) *rawClient {
	return newRawClientOf(b, stemMCP(b), in, level)
}

// newRawClientOf is newRawClient of the stem-mcp binary bin.
func newRawClientOf(b *testing.B, bin string, in *testenv.Instance, level string) *rawClient {
	cmd := exec.Command(bin, "serve", "--level", level)
	cmd.Env = in.Env
	w, _ := cmd.StdinPipe()
	r, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &rawClient{cmd: cmd, in: w, out: bufio.NewReaderSize(r, 1<<20)}
	b.Cleanup(func() { w.Close(); cmd.Wait() })
	c.roundTrip(b, `"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return c
}

// roundTrip sends one request (the fields after jsonrpc and id) and reads
// lines until the response with its id.
func (c *rawClient) roundTrip(b *testing.B, fields string) string {
	c.id++
	id := fmt.Sprintf(`"id":%d`, c.id)
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0",`+id+`,`+fields+"}\n"); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			b.Fatalf("read: %v", err)
		}
		if strings.Contains(line, id+",") || strings.Contains(line, id+"}") {
			if strings.Contains(line, `"isError":true`) || strings.Contains(line, `"error":{`) {
				b.Fatalf("error response: %.300s", line)
			}
			return line
		}
	}
}

func benchRaw(b *testing.B, c *rawClient, tool, args string) {
	req := `"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}`
	// Untimed warm-up: the figure is the steady state, not the first calls
	// (Neovim's LuaJIT traces, the Go runtime's first heap growth).
	for range 50 {
		c.roundTrip(b, req)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		c.roundTrip(b, req)
		samples = append(samples, time.Since(start))
	}
	report(b, samples)
}

// BenchmarkRawPaneCapture is pane_capture over stdio with a minimal client.
func BenchmarkRawPaneCapture(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	benchRaw(b, newRawClient(b, in, "observe"), "pane_capture", `{"pane":"`+pane+`"}`)
}

// BenchmarkRawPing is a JSON-RPC ping through stem-mcp with the same
// client: the pipes, the transport and mcp-go, no tool. Beside
// BenchmarkRawPaneCapture and BenchmarkTmuxCapture it splits a capture
// into the transport's share, tmux's and the rest (verification, policy,
// the tool and its result).
func BenchmarkRawPing(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	c := newRawClient(b, in, "observe")
	for range 50 {
		c.roundTrip(b, `"method":"ping"`)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		c.roundTrip(b, `"method":"ping"`)
		samples = append(samples, time.Since(start))
	}
	report(b, samples)
}

// BenchmarkTmuxCapture is the tmux round trip of pane_capture alone: the
// same capture (joined lines, with the cursor position) over a control
// client of the instance's tmux, from this process.
func BenchmarkTmuxCapture(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	pane := tmux.PaneID(strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := tmux.Dial(ctx, tmux.Options{Socket: in.Dir.Tmux(), Session: "stem"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	opt := tmux.CaptureOptions{Join: true, Position: true, MaxBytes: 64 << 10}
	for range 50 {
		if _, err := c.Capture(ctx, pane, opt); err != nil {
			b.Fatal(err)
		}
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := c.Capture(ctx, pane, opt); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	report(b, samples)
}

// BenchmarkRawBufferRead1000 is nvim_buffer_read of 1,000 lines over stdio
// with a minimal client.
func BenchmarkRawBufferRead1000(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	var lines []string
	for i := 0; i < 1000; i++ {
		lines = append(lines, fmt.Sprintf("    x[%d] = compute(%d) + offset; /* line %d of the benchmark file */", i, i, i))
	}
	os.WriteFile(filepath.Join(in.Resolved.TaskDir, "bench.c"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	c := newRawClient(b, in, "assist")
	c.roundTrip(b, `"method":"tools/call","params":{"name":"nvim_open","arguments":{"path":"t1/bench.c"}}`)
	benchRaw(b, c, "nvim_buffer_read", `{"path":"t1/bench.c","start":1,"end":1000,"max_bytes":262144}`)
}
