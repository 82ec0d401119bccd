package agent_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// sessionStart waits for the first MCP session the agent's CLI opened
// with stem (its audit session_start) and returns its time.
func (b *boxAccount) sessionStart(tb testing.TB, rec agentstore.Record, d time.Duration) time.Time {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		var entries []struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
		}
		out := b.must("audit", "show", "--agent", rec.ID, "--event", "session_start", "--json")
		if json.Unmarshal([]byte(out), &entries) == nil && len(entries) > 0 {
			return entries[0].Time
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s opened no MCP session with stem within %s; log:\n%s", rec.Provider, d, readFile(rec.Log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memory is the sandbox's memory use as Podman reports it, in MiB.
func sandboxMiB(tb testing.TB, a *account, name string) float64 {
	tb.Helper()
	out, err := a.podman("stats", "--no-stream", "--format", "{{.MemUsageBytes}}", name)
	if err != nil && strings.Contains(out, "rootless mode without cgroups v2") {
		return rssMiB(tb, a, name)
	}
	if err != nil {
		tb.Fatalf("podman stats: %v %s", err, out)
	}
	used, _, _ := strings.Cut(strings.TrimSpace(out), "/")
	used = strings.TrimSpace(used)
	mult := map[string]float64{"kB": 1.0 / 1024, "KB": 1.0 / 1024, "KiB": 1.0 / 1024, "MB": 1, "MiB": 1, "GB": 1024, "GiB": 1024, "B": 1.0 / (1 << 20)}
	for unit, m := range mult {
		if v, ok := strings.CutSuffix(used, unit); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f * m
			}
		}
	}
	tb.Fatalf("podman stats: %q", out)
	return 0
}

// phases are the times of the supervisor's log lines for one agent
// start: its window connected, its sandbox started, the CLI's first
// output.
type phases struct{ window, sandbox, output time.Time }

func logPhases(tb testing.TB, log string) phases {
	tb.Helper()
	var p phases
	for _, line := range strings.Split(log, "\n") {
		rest, ok := strings.CutPrefix(line, "stemctl agent run: ")
		if !ok || len(rest) < 26 {
			continue
		}
		at, err := time.ParseInLocation("2006/01/02 15:04:05.000000", rest[:26], time.Local)
		if err != nil {
			continue
		}
		msg := rest[27:]
		switch {
		case strings.HasPrefix(msg, "window connected") && p.window.IsZero():
			p.window = at
		case strings.HasPrefix(msg, "sandbox ") && strings.Contains(msg, " started in "):
			p.sandbox = at
		case strings.HasPrefix(msg, "started "):
			p.output = at
		}
	}
	if p.window.IsZero() || p.sandbox.IsZero() || p.output.IsZero() {
		tb.Fatalf("the supervisor's log lacks a phase (%+v):\n%s", p, log)
	}
	return p
}

// rssMiB is the resident memory of the sandbox's processes (its own
// reading included), where rootless Podman on cgroups v1 has no
// statistics: close to, and below, what the cgroup would count.
func rssMiB(tb testing.TB, a *account, name string) float64 {
	tb.Helper()
	out, err := a.podman("exec", name, "sh", "-c", "cat /proc/[0-9]*/status 2>/dev/null")
	if err != nil {
		tb.Fatalf("the sandbox's processes: %v %s", err, out)
	}
	var kib float64
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			kib += f
		}
	}
	return kib / 1024
}

// Figures for the sandboxed real CLIs: `agent start` (instance up, images
// built) to the CLI's first MCP session with stem, split at the
// supervisor's log lines (the student's window connected, the sandbox
// started, the CLI's first output), and the sandbox's memory once the
// CLI is idle at its prompt. rootless is the same for claude in a
// non-root student's rootless Podman.
func BenchmarkSandboxedAgentStart(b *testing.B) {
	for _, mode := range []string{"rootful", "rootless"} {
		for _, provider := range []string{"claude", "codex", "gemini"} {
			if mode == "rootless" && provider != "claude" {
				continue
			}
			b.Run(mode+"/"+provider, func(b *testing.B) {
				var ba *boxAccount
				if mode == "rootless" {
					ba, _ = newStudentBoxAccount(b, modelserver.Say("ok"))
				} else {
					ba = newBoxAccountTB(b, modelserver.Say("ok"))
				}
				ba.must("up", "native-amd64", "demo", "hello", "1")
				st := ba.status(nativeInst)
				var window, box, output, mcp []time.Duration
				var mem []float64
				for b.Loop() {
					t0 := time.Now()
					rec := ba.start(provider, "--background")
					first := ba.sessionStart(b, rec, 60*time.Second)
					ph := logPhases(b, readFile(rec.Log))
					window, box = append(window, ph.window.Sub(t0)), append(box, ph.sandbox.Sub(t0))
					output, mcp = append(output, ph.output.Sub(t0)), append(mcp, first.Sub(t0))
					ba.waitReady(st, rec)
					mem = append(mem, sandboxMiB(b, ba.account, rec.Sandbox))
					ba.must("agent", "stop", rec.ID)
				}
				b.ReportMetric(float64(median(window).Milliseconds()), "window-p50-ms")
				b.ReportMetric(float64(median(box).Milliseconds()), "sandbox-up-p50-ms")
				b.ReportMetric(float64(median(output).Milliseconds()), "cli-output-p50-ms")
				b.ReportMetric(float64(median(mcp).Milliseconds()), "start-to-mcp-p50-ms")
				b.ReportMetric(float64(maxOf(mcp).Milliseconds()), "start-to-mcp-max-ms")
				b.ReportMetric(mem[len(mem)/2], "idle-MiB")
			})
		}
	}
}
