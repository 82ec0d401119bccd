package class

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/errcode"
)

// The gate's refusals are told apart by their code, whatever the words
// around it say; a gate from before codes is still understood.
func TestClassifyReadsTheGatesCode(t *testing.T) {
	t.Parallel()
	st := Student{Name: "anna", Host: "anna@lab-03"}
	// A refusal's code also picks what the teacher is told to do.
	fixes := map[string]string{
		"named expired": "stemctl access list", "not audited": "stemctl audit verify", "bad setup": "stemctl access check",
		"grants unreadable": "stemctl access check", "changed": "connect again",
	}
	for _, tc := range []struct {
		name   string
		exit   int
		stderr string
		want   Reach
	}{
		{"revoked", 1, "stem-mcp gate: [revoked] refused: grant g0123 does not exist (revoked?); ask the student to grant this key again\n", ReachRevoked},
		{"revoked in session", 1, "stem-mcp gate: [revoked] refused: grant kowalski was revoked; session ended\n", ReachRevoked},
		{"expired", 1, "stem-mcp gate: [expired] refused: grant kowalski expired at 2026-12-01T10:00:00Z; ask the student for a new grant\n", ReachExpired},
		// The words say "expired" and "revoked?" (a grant may be named so),
		// the code says what happened: the old text match took these for
		// an expired or revoked grant.
		{"named expired", 1, "stem-mcp gate: [not_granted] refused: client address \"192.0.2.7\" is not allowed by grant expired (from=10.0.0.0/8)\n", ReachGateRefused},
		{"prose says revoked", 1, "stem-mcp gate: [bad_input] refused: \"does\" is not a verb of this key; it only accepts `mcp [INSTANCE]`, `status` or `list` (no shell) does not exist (revoked?)\n", ReachGateRefused},
		{"unknown code", 1, "stem-mcp gate: [some_newer_code] refused: something new\n", ReachGateRefused},
		{"grants unreadable", 1, "stem-mcp gate: [bad_setup] refused: grant g0123 cannot be read: grants.json is writable by group or others\n", ReachGateRefused},
		{"changed", 1, "stem-mcp gate: [grant_changed] refused: grant kowalski was changed; session ended (connect again)\n", ReachGateRefused},
		{"not audited", 1, "stem-mcp gate: [not_audited] refused: status not given: the audit log cannot be written\n", ReachGateRefused},
		{"bad setup", 2, "stem-mcp gate: [bad_setup] bad forced command (usage: stem-mcp gate --grant ID [--config-dir DIR])\n", ReachBroken},
		// A gate older than codes: its words.
		{"old revoked", 1, "stem-mcp gate: refused: grant g0123 does not exist (revoked?); ask the student to grant this key again\n", ReachRevoked},
		{"old revoked in session", 1, "stem-mcp gate: refused: grant kowalski was revoked; session ended\n", ReachRevoked},
		{"old expired", 1, "stem-mcp gate: refused: grant kowalski expired at 2026-12-01T10:00:00Z; ask the student for a new grant\n", ReachExpired},
		{"old expired in session", 1, "stem-mcp gate: refused: grant kowalski expired; session ended\n", ReachExpired},
		{"old other", 1, "stem-mcp gate: refused: client address \"192.0.2.7\" is not allowed by grant expired (from=10.0.0.0/8)\n", ReachGateRefused},
		{"old broken", 2, "stem-mcp gate: bad forced command (usage: stem-mcp gate --grant ID [--config-dir DIR])\n", ReachBroken},
	} {
		f := classify(st, tc.exit, tc.stderr)
		if fix, ok := fixes[tc.name]; ok && !strings.Contains(f.fix, fix) {
			t.Errorf("%s: fix %q, want it to say %q", tc.name, f.fix, fix)
		}
		if f.reach != tc.want || f.fix == "" {
			t.Errorf("%s: reach %s (fix %q), want %s", tc.name, f.reach, f.fix, tc.want)
		}
		if code, _, ok := errcode.Cut(f.why); ok {
			t.Errorf("%s: the code %s is left in what the teacher reads: %q", tc.name, code, f.why)
		}
	}
}
