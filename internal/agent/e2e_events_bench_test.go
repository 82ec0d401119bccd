package agent_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// From a crash in the student's shell (its notification at an MCP client
// of the test's) to the event line in the request the real CLI sends its
// model, with the CLI idle beforehand. "stem-ms" is the supervisor's own
// count from its log: its receipt of the event (earlier than the test's
// client's) to the line typed and checked submitted, so it includes the
// 300 ms the CLI's output must have been quiet and the check after Enter,
// and can exceed the end-to-end median.
//
//	go test ./internal/agent -run '^$' -bench EventToModel -benchtime 5x
func BenchmarkEventToModel(b *testing.B) {
	for _, provider := range []string{"claude", "codex", "gemini"} {
		b.Run(provider, func(b *testing.B) {
			if b.N > len(crashSignals) {
				b.Fatalf("-benchtime %dx: at most %dx, one crash per signal", b.N, len(crashSignals))
			}
			script := []modelserver.Step{modelserver.Say("stem-ready")}
			for i := 0; i < 64; i++ {
				script = append(script, modelserver.Say(fmt.Sprintf("stem-ack-%d", i)))
			}
			ba := newBoxAccountTB(b, script...)
			rec := ba.start(provider)
			st := ba.status(nativeInst)
			ba.prompt(st, rec, "hello")
			ba.waitPane(st, rec.Pane, "stem-ready", 60*time.Second)
			s := ba.mcp(nativeInst, "observe")
			s.call("session_events", nil)
			shell := ba.shellWindow(st)
			ba.tmux(st, "select-window", "-t", rec.Window)
			var total []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The interval between two lines is stem's rule, not part
				// of the latency: wait it out with the CLI idle.
				b.StopTimer()
				if i > 0 {
					ba.waitPane(st, rec.Pane, fmt.Sprintf("stem-ack-%d", i-1), 60*time.Second)
				}
				time.Sleep(agentEventInterval)
				b.StartTimer()
				// Each crash by another signal: a line the CLI was sent
				// before does not count as the next request.
				sig := crashSignals[i]
				total = append(total, ba.eventReaches(st, rec, s, "program_crashed", runspec.EventPrefix+" program crashed: SIG"+sig, func() {
					ba.tmux(st, "send-keys", "-t", shell, "sh -c 'kill -"+sig+" $$'", "Enter")
				}))
			}
			b.StopTimer()
			stem := typedAfter(readFile(rec.Log))
			b.ReportMetric(float64(median(total).Milliseconds()), "median-ms")
			b.ReportMetric(float64(maxOf(total).Milliseconds()), "max-ms")
			if len(stem) > 0 {
				b.ReportMetric(float64(median(stem).Milliseconds()), "stem-ms")
			}
		})
	}
}

// crashSignals are the signals stem reports as a crash.
var crashSignals = []string{"SEGV", "ABRT", "BUS", "FPE", "ILL", "TRAP"}

// agentEventInterval is the supervisor's least interval between lines.
const agentEventInterval = 5 * time.Second

var waitedRE = regexp.MustCompile(`typed event line \(event \d+, waited ([^)]+)\)`)

// typedAfter reads how long each line waited in the supervisor (from the
// event's receipt to Enter typed).
func typedAfter(log string) []time.Duration {
	var out []time.Duration
	for _, m := range waitedRE.FindAllStringSubmatch(log, -1) {
		if d, err := time.ParseDuration(strings.TrimSpace(m[1])); err == nil {
			out = append(out, d)
		}
	}
	return out
}
