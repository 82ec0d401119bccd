package agentpolicy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/levels"
)

func TestTools(t *testing.T) {
	if got, want := Default().Tools(levels.Full), levels.ToolNames(levels.Full); !slices.Equal(got, dedup(want)) {
		t.Errorf("default policy at full: %v, want %v", got, want)
	}
	exam := Policy{MaxLevel: CapNone, Edits: EditsDirect, Hints: true}
	if got := exam.Tools(levels.Full); !slices.Equal(got, []string{"task_info"}) {
		t.Errorf("none: %v, want only task_info", got)
	}
	obs := Policy{MaxLevel: CapObserve, Edits: EditsDirect, Hints: true}
	if got, want := obs.Tools(levels.Full), levels.ToolNames(levels.Observe); !slices.Equal(got, want) {
		t.Errorf("observe cap on a full server: %v, want %v", got, want)
	}
	hintsOnly := Policy{MaxLevel: CapAssist, Edits: EditsNone, Hints: true}
	got := hintsOnly.Tools(levels.Full)
	if slices.Contains(got, "nvim_buffer_edit") || !slices.Contains(got, "nvim_hint") || slices.Contains(got, "pane_run") || !slices.Contains(got, "pane_send_keys") {
		t.Errorf("hints-only lab at full: %v", got)
	}
	noHints := Policy{MaxLevel: CapAssist, Edits: EditsDirect, Hints: false}
	if got := noHints.Tools(levels.Assist); slices.Contains(got, "nvim_hint") || !slices.Contains(got, "nvim_buffer_edit") {
		t.Errorf("hints = false: %v", got)
	}
	// A cap above the server's level changes nothing.
	if got, want := (Policy{MaxLevel: CapAssist, Edits: EditsDirect, Hints: true}).Tools(levels.Observe), levels.ToolNames(levels.Observe); !slices.Equal(got, want) {
		t.Errorf("assist cap on an observe server: %v, want %v", got, want)
	}
}

func dedup(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestRefusalSaysWhy(t *testing.T) {
	p := Policy{MaxLevel: CapObserve, Edits: EditsNone, Hints: true}
	if r := p.Refusal("pane_send_keys", levels.Full); !strings.Contains(r, `max_level = "observe"`) {
		t.Errorf("refusal %q", r)
	}
	if r := p.Refusal("pane_capture", levels.Full); r != "" {
		t.Errorf("pane_capture refused under observe: %q", r)
	}
	p.MaxLevel = CapAssist
	if r := p.Refusal("nvim_buffer_edit", levels.Assist); !strings.Contains(r, `edits = "none"`) {
		t.Errorf("refusal %q", r)
	}
	if r := p.Refusal("proposal_status", levels.Assist); !strings.Contains(r, `edits = "none"`) {
		t.Errorf("refusal %q", r)
	}
	// propose keeps the edit tool (it proposes) and the status of proposals.
	p.Edits = EditsPropose
	for _, n := range []string{"nvim_buffer_edit", "proposal_status"} {
		if r := p.Refusal(n, levels.Assist); r != "" {
			t.Errorf("%s refused under edits = propose: %q", n, r)
		}
	}
	if d := p.Describe(levels.Assist); !strings.Contains(d, "proposal_status") || strings.Contains(d, "cannot") {
		t.Errorf("Describe under propose: %q", d)
	}
}

func TestMeetIsStricter(t *testing.T) {
	a := Policy{MaxLevel: CapAssist, Edits: EditsDirect, Hints: true, Approve: []string{"task_action"}}
	b := Policy{MaxLevel: CapFull, Edits: EditsPropose, Hints: false, Approve: []string{"gdb_continue"}}
	for _, m := range []Policy{Meet(a, b), Meet(b, a)} {
		if m.MaxLevel != CapAssist || m.Edits != EditsPropose || m.Hints || len(m.Approve) != 2 {
			t.Errorf("meet: %+v", m)
		}
	}
	if m := Meet(Default(), Policy{MaxLevel: CapNone, Edits: EditsNone}); m.MaxLevel != CapNone || m.Edits != EditsNone {
		t.Errorf("meet with none: %+v", m)
	}
	// An unknown cap (a record written by a newer stem) fails closed.
	if _, ok := (Policy{MaxLevel: "bogus"}).Effective(levels.Full); ok {
		t.Error("an unknown max_level leaves access")
	}
}

// A value quoted back in an error is clipped, never cut inside a
// character: "€" (3 bytes) straddles the clip at byte 40.
func TestBadValueClipKeepsCharactersWhole(t *testing.T) {
	v := strings.Repeat("a", maxQuoted-1) + "€" + strings.Repeat("b", 100)
	// Control: a plain byte cut at maxQuoted splits the "€".
	if utf8.ValidString(v[:maxQuoted]) {
		t.Fatalf("the input does not straddle the clip")
	}
	var c Cap
	var e Edits
	var n ToolName
	for what, u := range map[string]interface{ UnmarshalText([]byte) error }{"max_level": &c, "edits": &e, "approve": &n} {
		err := u.UnmarshalText([]byte(v))
		if err == nil {
			t.Fatalf("%s: %q accepted", what, v)
		}
		msg := err.Error()
		want := strconv.Quote(strings.Repeat("a", maxQuoted-1) + "…")
		if !strings.Contains(msg, want) || strings.Contains(msg, `\x`) || strings.Contains(msg, "bbbb") {
			t.Errorf("%s: %s\nwant the value quoted as %s (whole characters, clipped)", what, msg, want)
		}
	}
}
