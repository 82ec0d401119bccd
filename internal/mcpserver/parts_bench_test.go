package mcpserver_test

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkEditorRestartNextCall: Neovim killed (an agent's call refused
// meanwhile) and started again; from the moment the new Neovim answers to
// the agent's next editor call answered, on the same MCP session.
func BenchmarkEditorRestartNextCall(b *testing.B) {
	in := fixture(b)
	s := connect(b, in, "observe")
	s.ok("nvim_status", nil)
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		in.KillNvim(b)
		if msg := s.refused("nvim_status", nil); !strings.Contains(msg, "Neovim is not running") {
			b.Fatalf("nvim_status with Neovim killed: %s", msg)
		}
		in.StartNvim(b) // returns once the new Neovim answers
		b.StartTimer()
		t0 := time.Now()
		s.ok("nvim_status", nil)
		took = append(took, time.Since(t0))
	}
	report(b, took)
}
