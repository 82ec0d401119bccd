package agent

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

func TestAgentStartRefusesAnExamTask(t *testing.T) {
	r := &workspace.Resolved{Series: "inf", Card: "bss", TaskID: "4", Policy: agentpolicy.Policy{MaxLevel: agentpolicy.CapNone, Edits: agentpolicy.EditsDirect, Hints: true}}
	if _, err := checkPolicy(Request{Level: levels.Assist, Resolved: r}); err == nil || !strings.Contains(err.Error(), `max_level = "none"`) {
		t.Fatalf("agent start on an exam task: %v", err)
	}
	// The policy recorded with the instance counts even when the card's
	// stem.toml no longer says so.
	r.Policy = agentpolicy.Default()
	exam := agentpolicy.Policy{MaxLevel: agentpolicy.CapNone, Edits: agentpolicy.EditsDirect, Hints: true}
	req := Request{Level: levels.Assist, Resolved: r, Target: verify.Target{Record: registry.Record{Policy: &exam}}}
	if _, err := checkPolicy(req); err == nil {
		t.Fatal("a loosened stem.toml let an agent start on an exam instance")
	}
	req.Target.Record.Policy = nil
	if _, err := checkPolicy(req); err != nil {
		t.Fatalf("no policy: %v", err)
	}
}
