package mcpserver_test

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkApprovalRoundTrip is an approved call's time without the
// student's reaction: from the call to the question on the student's
// terminal (audit entry, list-clients, command-prompt, tmux's redraw),
// plus from the key to the result (tmux running the answer, the poll,
// the audit entry, the tool itself). approval-p50-ms subtracts the same
// call made without approval.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	in := fixture(b)
	term := attachTerminal(b, in)
	s := connect(b, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	hint := map[string]any{"path": "t1/words.c", "line": 3, "text": "look here"}
	// The same call without approval, for the approval's own share.
	var plain []time.Duration
	for range 30 {
		t0 := time.Now()
		s.ok("nvim_hint", hint)
		plain = append(plain, time.Since(t0))
	}
	slices.Sort(plain)
	in.SetAgentPolicy(b, `approve = ["nvim_hint"]`)
	var rts, asks, answers []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := term.mark()
		t0 := time.Now()
		res := s.async("nvim_hint", hint)
		if !term.waitFor(m, "y: allow once", 10*time.Second) {
			b.Fatal("no question")
		}
		asked := time.Since(t0)
		t2 := time.Now()
		term.press("y")
		if r := <-res; r.err != nil || r.etext != "" {
			b.Fatalf("%v %s", r.err, r.etext)
		}
		rts = append(rts, asked+time.Since(t2))
		asks, answers = append(asks, asked), append(answers, time.Since(t2))
	}
	b.StopTimer()
	slices.Sort(rts)
	slices.Sort(asks)
	slices.Sort(answers)
	b.ReportMetric(float64(asks[len(asks)/2].Microseconds())/1000, "ask-p50-ms")
	b.ReportMetric(float64(answers[len(answers)/2].Microseconds())/1000, "answer-p50-ms")
	b.ReportMetric(float64(rts[len(rts)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(rts[len(rts)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(plain[len(plain)/2].Microseconds())/1000, "unapproved-call-p50-ms")
	b.ReportMetric(float64((rts[len(rts)/2]-plain[len(plain)/2]).Microseconds())/1000, "approval-p50-ms")
}
