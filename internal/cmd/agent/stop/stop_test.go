package stop_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/agent/stop"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// With no agents, every selector says so and how to see them; an id
// that looks right but names no agent is refused, not taken as done.
func TestStopWithNoAgents(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	for _, args := range [][]string{{"--all"}, {"--all", "--json"}, {"--provider", "codex"}} {
		err := w.Run(stop.NewCmdStop(w.F, nil), args...)
		if err == nil || !strings.Contains(err.Error(), "no running agent matches (stemctl agent list shows them)") {
			t.Fatalf("%v: %v", args, err)
		}
		if w.Out.Len() != 0 {
			t.Fatalf("%v printed %q", args, w.Out)
		}
	}
	if err := w.Run(stop.NewCmdStop(w.F, nil), "0a1b2c"); err == nil || !strings.Contains(err.Error(), "no agent 0a1b2c (stemctl agent list") {
		t.Fatalf("stop of an agent that does not exist: %v", err)
	}
	if err := w.Run(stop.NewCmdStop(w.F, nil), "--instance", "nosuch"); err == nil || !strings.Contains(err.Error(), "no running agent matches") {
		t.Fatalf("stop --instance of an unknown instance: %v", err)
	}
}
