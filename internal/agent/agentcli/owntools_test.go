package agentcli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
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
