package mcpserver_test

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkProposalCreate is nvim_buffer_edit under edits = "propose",
// from the call to the result over stdio: the edit's checks, the audit
// intent, the plugin's diff and drawing in Neovim, the proposal_create
// entry and the outcome entry. The target is a p50 under 5 ms. Each
// proposal is rejected (untimed) so open ones do not pile up.
func BenchmarkProposalCreate(b *testing.B) {
	in := fixture(b)
	in.SetAgentPolicy(b, "max_level = \"assist\"\nedits = \"propose\"")
	s := connect(b, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	args := map[string]any{"path": "t1/words.c", "start": 10, "end": 10, "lines": []any{"    return c == ' ' || c == '\\t';"}}
	// An effectful call without a proposal, for comparison: its checks,
	// the fresh verification and two audit entries.
	var plain []time.Duration
	hint := map[string]any{"path": "t1/words.c", "line": 3, "text": "look here"}
	for range 50 {
		t0 := time.Now()
		s.ok("nvim_hint", hint)
		plain = append(plain, time.Since(t0))
	}
	slices.Sort(plain)
	var samples []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out, etext, err := s.call("nvim_buffer_edit", args)
		samples = append(samples, time.Since(t0))
		if err != nil || etext != "" {
			b.Fatalf("%v %s", err, etext)
		}
		b.StopTimer()
		if _, err := hostProposals(b, in, "reject", str(out["proposal"]), "--yes"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	report(b, samples)
	b.ReportMetric(float64(plain[len(plain)/2].Microseconds())/1000, "hint-p50-ms")
}
