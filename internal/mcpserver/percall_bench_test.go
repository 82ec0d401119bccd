package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/tmux"
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

// BenchmarkPerCallPaired is the per-call breakdown of a pane_capture (a
// ping, tmux alone, the whole call) for the stem-mcp under test and, with
// STEM_MCP_BASELINE set to another stem-mcp binary, for that one too, in
// turns of blocks of calls on the same instance: on a shared machine whose
// load drifts, only figures taken side by side compare. Beside each p50 is
// the server's CPU time per call (its threads' time on a CPU, from
// /proc), which the machine's load changes much less than latency.
func BenchmarkPerCallPaired(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	reqs := map[string]string{
		"ping":    `"method":"ping"`,
		"capture": `"method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"` + pane + `"}}`,
	}
	type side struct {
		name string
		c    *rawClient
		lat  map[string][]time.Duration
		cpu  map[string]time.Duration
	}
	sides := []*side{{name: "", c: newRawClient(b, in, "observe")}}
	if base := os.Getenv("STEM_MCP_BASELINE"); base != "" {
		sides = append(sides, &side{name: "baseline-", c: newRawClientOf(b, base, in, "observe")})
	}
	for _, sd := range sides {
		sd.lat, sd.cpu = map[string][]time.Duration{}, map[string]time.Duration{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tc, err := tmux.Dial(ctx, tmux.Options{Socket: in.Dir.Tmux(), Session: "stem"})
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	opt := tmux.CaptureOptions{Join: true, Position: true, MaxBytes: 64 << 10}
	var tmuxAlone []time.Duration
	const block = 50
	round := func(n int, keep bool) {
		for _, kind := range []string{"ping", "capture"} {
			for _, sd := range sides {
				cpu0 := cpuTime(b, sd.c.cmd.Process.Pid)
				for range n {
					start := time.Now()
					sd.c.roundTrip(b, reqs[kind])
					if keep {
						sd.lat[kind] = append(sd.lat[kind], time.Since(start))
					}
				}
				if keep {
					sd.cpu[kind] += cpuTime(b, sd.c.cmd.Process.Pid) - cpu0
				}
			}
		}
		for range n {
			start := time.Now()
			if _, err := tc.Capture(ctx, tmux.PaneID(pane), opt); err != nil {
				b.Fatal(err)
			}
			if keep {
				tmuxAlone = append(tmuxAlone, time.Since(start))
			}
		}
	}
	round(block, false)
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		round(min(block, b.N-done), true)
	}
	b.StopTimer()
	p50 := func(s []time.Duration) float64 {
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(tmuxAlone), "tmux-p50-ms")
	for _, sd := range sides {
		for _, kind := range []string{"ping", "capture"} {
			b.ReportMetric(p50(sd.lat[kind]), sd.name+kind+"-p50-ms")
			b.ReportMetric(float64(sd.cpu[kind].Microseconds())/float64(len(sd.lat[kind])), sd.name+kind+"-cpu-us")
		}
	}
}

// cpuTime is the time the threads of process pid have run on a CPU
// (/proc/PID/task/*/schedstat, in nanoseconds).
func cpuTime(b *testing.B, pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		var ns int64
		fmt.Sscan(string(data), &ns)
		sum += time.Duration(ns)
	}
	return sum
}
