package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

// The CLI permissions each adapter sets under a policy: the fast check of
// what clis_policy_test.go shows the real CLIs make of them.
func TestPolicySetsTheCLIPermissions(t *testing.T) {
	hints := &agentpolicy.Policy{MaxLevel: agentpolicy.CapAssist, Edits: agentpolicy.EditsNone, Hints: true}
	noHints := &agentpolicy.Policy{MaxLevel: agentpolicy.CapFull, Edits: agentpolicy.EditsDirect, Hints: false}
	for _, tc := range []struct {
		adapter string
		policy  *agentpolicy.Policy
		off     bool
	}{
		{"codex", nil, false}, {"codex", hints, true}, {"codex", noHints, false},
		{"claude", nil, false}, {"claude", hints, true}, {"claude", noHints, false},
		{"gemini", nil, false}, {"gemini", hints, true}, {"gemini", noHints, false},
	} {
		s := testSession(tc.adapter, tc.adapter)
		s.Policy = tc.policy
		l, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		argv := strings.Join(l.Argv, " ")
		var got bool
		switch tc.adapter {
		case "codex":
			got = strings.Contains(argv, "--sandbox read-only")
		case "claude":
			got = strings.Contains(argv, "--disallowedTools "+strings.Join(claudeWriteTools, ","))
		case "gemini":
			var st struct {
				Tools struct {
					Exclude []string `json:"exclude"`
				} `json:"tools"`
			}
			json.Unmarshal(l.Files[GeminiDefaults], &st)
			got = slices.Equal(st.Tools.Exclude, geminiWriteTools)
		}
		if got != tc.off {
			t.Errorf("%s with policy %+v: own edits off = %v, want %v (argv %s)", tc.adapter, tc.policy, got, tc.off, argv)
		}
	}
}

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
