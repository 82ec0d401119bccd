package mcpserver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/decision"
)

// BenchmarkApprovalRoundTrip is an approved call's time without the
// student's reaction: from the call to the question in the host spool
// (audit entry, the question file; a host input's own poll aside), plus
// from the answer to the result (the asker's poll, the audit entry, the
// tool itself). approval-p50-ms subtracts the same call made without
// approval.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	in := fixture(b)
	h := hostInput(b, in)
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
		t0 := time.Now()
		res := s.async("nvim_hint", hint)
		q := h.question()
		asked := time.Since(t0)
		t2 := time.Now()
		h.answer(q, decision.Yes)
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
