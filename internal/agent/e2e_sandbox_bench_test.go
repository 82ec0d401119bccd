package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
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

// settledMiB is the sandbox's memory once it stops moving: two readings
// half a second apart within 1 MiB (the CLI at its prompt may still be
// loading or collecting when the prompt shows).
func settledMiB(tb testing.TB, a *account, name string) float64 {
	tb.Helper()
	last := sandboxMiB(tb, a, name)
	for range 40 {
		time.Sleep(500 * time.Millisecond)
		now := sandboxMiB(tb, a, name)
		if now-last < 1 && last-now < 1 {
			return now
		}
		last = now
	}
	return last
}

func medianF(fs []float64) float64 {
	s := append([]float64(nil), fs...)
	sort.Float64s(s)
	return s[len(s)/2]
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

// geminiRelaunchEnv, in the gemini provider's env in agents.toml (which
// wins over stem's sandbox env), undoes what stem sets to keep Gemini CLI
// in one Node.js process: its start as it is, paired with stem's.
const geminiRelaunchEnv = `env = { GEMINI_CLI_NO_RELAUNCH = "", NODE_OPTIONS = "" }` + "\n"

// configVariants returns agents.toml as it is and with the gemini
// provider's settings undone, and a function writing either.
func configVariants(tb testing.TB, ba *boxAccount) (string, string, func(string)) {
	tb.Helper()
	path := filepath.Join(ba.Base, "config", agentcli.ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	const table = "[providers.gemini]\n"
	if !strings.Contains(string(data), table) {
		tb.Fatalf("%s has no %s", path, table)
	}
	undone := strings.Replace(string(data), table, table+geminiRelaunchEnv, 1)
	return string(data), undone, func(cfg string) {
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// processes lists the sandbox's processes with their resident memory,
// split into anonymous (heaps) and file-backed (program and module text).
func processes(tb testing.TB, a *account, name string) string {
	tb.Helper()
	out, err := a.podman("exec", name, "sh", "-c",
		`for d in /proc/[0-9]*; do printf '%s ' "${d#/proc/}"; grep -hE '^(VmRSS|RssAnon|RssFile)' $d/status | tr -s ' \t' ' ' | tr '\n' ' '; tr '\0' ' ' < $d/cmdline | cut -c1-100; done`)
	if err != nil {
		return fmt.Sprintf("the sandbox's processes: %v %s", err, out)
	}
	return out
}

// startFigures are one start's figures, from `agent start`.
type startFigures struct {
	window, box, output, mcp, ready []time.Duration
	refused                         int
	mem                             []float64
}

// startOnce starts the agent, waits for its prompt and its MCP session,
// reads its memory once settled and stops it.
func (f *startFigures) startOnce(b *testing.B, ba *boxAccount, st instanceInfo, mode, provider, label string) {
	t0 := time.Now()
	rec := ba.start(provider, "--background")
	ba.waitReady(st, rec)
	f.ready = append(f.ready, time.Since(t0))
	first := ba.sessionStart(b, rec, 60*time.Second)
	log := readFile(rec.Log)
	ph := logPhases(b, log)
	f.window, f.box = append(f.window, ph.window.Sub(t0)), append(f.box, ph.sandbox.Sub(t0))
	f.output, f.mcp = append(f.output, ph.output.Sub(t0)), append(f.mcp, first.Sub(t0))
	f.refused += strings.Count(log, "egress refused ")
	f.mem = append(f.mem, settledMiB(b, ba.account, rec.Sandbox))
	if dir := os.Getenv("STEM_BENCH_LOGS"); dir != "" {
		// The supervisor's log (egress decisions, phases), the model's
		// requests and the sandbox's processes: what a CLI waits for.
		var sb strings.Builder
		fmt.Fprintf(&sb, "ready %v mcp %v\n%s", f.ready[len(f.ready)-1], f.mcp[len(f.mcp)-1], log)
		for _, r := range ba.ms.Requests() {
			if r.Time.After(t0) {
				fmt.Fprintf(&sb, "model request %s %s at %v\n", r.API, r.Path, r.Time.Sub(t0))
			}
		}
		fmt.Fprintf(&sb, "idle %.1f MiB; processes:\n%s\n", f.mem[len(f.mem)-1], processes(b, ba.account, rec.Sandbox))
		os.WriteFile(filepath.Join(dir, mode+"-"+label+"-"+rec.ID+".log"), []byte(sb.String()), 0o600)
	}
	ba.must("agent", "stop", rec.ID)
}

func (f *startFigures) report(b *testing.B, prefix string) {
	b.ReportMetric(float64(median(f.window).Milliseconds()), prefix+"window-p50-ms")
	b.ReportMetric(float64(median(f.box).Milliseconds()), prefix+"sandbox-up-p50-ms")
	b.ReportMetric(float64(median(f.output).Milliseconds()), prefix+"cli-output-p50-ms")
	b.ReportMetric(float64(median(f.mcp).Milliseconds()), prefix+"start-to-mcp-p50-ms")
	b.ReportMetric(float64(maxOf(f.mcp).Milliseconds()), prefix+"start-to-mcp-max-ms")
	b.ReportMetric(float64(median(f.ready).Milliseconds()), prefix+"start-to-ready-p50-ms")
	b.ReportMetric(float64(maxOf(f.ready).Milliseconds()), prefix+"start-to-ready-max-ms")
	b.ReportMetric(float64(f.refused)/float64(len(f.ready)), prefix+"egress-refused/op")
	b.ReportMetric(medianF(f.mem), prefix+"idle-MiB")
}

// Figures for the sandboxed real CLIs: `agent start` (instance up, images
// built) to the CLI's first MCP session with stem, split at the
// supervisor's log lines (the student's window connected, the sandbox
// started, the CLI's first output), to the CLI showing its input prompt
// in the agent's window (ready for the student), and the sandbox's memory
// once the CLI is idle at its prompt. Each gemini iteration also starts
// Gemini CLI without stem's start-up settings (the relaunch- figures),
// paired, so that the machine's drifting load weighs on both alike.
// rootless is claude in a non-root student's rootless Podman.
// STEM_BENCH_LOGS names a directory for each start's log, model requests
// and sandbox processes.
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
				stem, undone, write := configVariants(b, ba)
				var figs, relaunch startFigures
				for b.Loop() {
					figs.startOnce(b, ba, st, mode, provider, provider)
					if provider == "gemini" {
						write(undone)
						relaunch.startOnce(b, ba, st, mode, provider, "gemini-relaunch")
						write(stem)
					}
				}
				figs.report(b, "")
				if provider == "gemini" {
					relaunch.report(b, "relaunch-")
				}
			})
		}
	}
}
