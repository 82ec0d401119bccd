// Package agentpolicy is a task's policy for AI agents, from the `agents`
// table of the card's stem.toml: the highest access level an agent may
// use, whether it may edit files directly, whether it may leave hints, and
// which tools need the student's approval.
//
// The policy caps every stem-mcp server of the instance (the student's
// local ones, those of agents stem starts, the teacher's through the gate)
// on top of the server's own level: a tool it removes is neither listed
// nor callable. It cannot reach what does not go through stem: the
// student's own programs, and agents the student runs outside stem.
package agentpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/tomlmsg"
	"github.com/stem-edu/stem/internal/termtext"
)

// Cap is max_level: a level's name (package levels), or none (no agent
// access).
type Cap string

const (
	CapFull    Cap = "full"
	CapAssist  Cap = "assist"
	CapObserve Cap = "observe"
	CapNone    Cap = "none"
)

// rank orders caps as the levels they name; none and an unknown cap rank
// lowest (fails closed).
func (c Cap) rank() int {
	l, err := levels.Parse(string(c))
	if err != nil {
		return 0
	}
	return int(l)
}

// UnmarshalText reads a cap from stem.toml.
func (c *Cap) UnmarshalText(b []byte) error {
	switch v := Cap(b); v {
	case CapFull, CapAssist, CapObserve, CapNone:
		*c = v
		return nil
	}
	return tomlmsg.BadValue("= %q is not a level: choose \"full\", \"assist\", \"observe\" or \"none\" (none: no agent access, for an exam)", termtext.Clip(string(b), maxQuoted))
}

// Edits is how an agent may change files: direct (its edits land in the
// buffer), propose (nvim_buffer_edit makes a proposal the student sees in
// their editor and accepts or rejects on the host), none.
type Edits string

const (
	EditsDirect  Edits = "direct"
	EditsPropose Edits = "propose"
	EditsNone    Edits = "none"
)

func (e Edits) rank() int {
	switch e {
	case EditsDirect:
		return 2
	case EditsPropose:
		return 1
	}
	return 0
}

// UnmarshalText reads edits from stem.toml.
func (e *Edits) UnmarshalText(b []byte) error {
	switch v := Edits(b); v {
	case EditsDirect, EditsPropose, EditsNone:
		*e = v
		return nil
	}
	return tomlmsg.BadValue("= %q is not a way of editing: choose \"direct\", \"propose\" or \"none\"", termtext.Clip(string(b), maxQuoted))
}

// ToolName is one entry of approve: a stem-mcp tool.
type ToolName string

// UnmarshalText reads a tool name from stem.toml.
func (t *ToolName) UnmarshalText(b []byte) error {
	if !levels.Known(string(b)) {
		return tomlmsg.BadValue("names %q, which is not a stem-mcp tool (tools: %s)", termtext.Clip(string(b), maxQuoted), strings.Join(approvable(), ", "))
	}
	*t = ToolName(b)
	return nil
}

// approvable lists the tools an approve list may name: those that act.
func approvable() []string {
	var out []string
	for _, n := range levels.ToolNames(levels.Full) {
		if !levels.Has(n, levels.Observe) {
			out = append(out, n)
		}
	}
	return out
}

// maxQuoted bounds a stem.toml value quoted back in an error.
const maxQuoted = 40

// Policy is the policy in force for one task.
type Policy struct {
	MaxLevel Cap      `json:"max_level"`
	Edits    Edits    `json:"edits"`
	Hints    bool     `json:"hints"`
	Approve  []string `json:"approve,omitempty"`
}

// Default is the policy of a task that says nothing: no cap.
func Default() Policy { return Policy{MaxLevel: CapFull, Edits: EditsDirect, Hints: true} }

// IsDefault reports whether p caps nothing.
func (p Policy) IsDefault() bool {
	return p.MaxLevel == CapFull && p.Edits == EditsDirect && p.Hints && len(p.Approve) == 0
}

// Effective is the level a server at l works at under p; false means none
// (no agent access).
func (p Policy) Effective(l levels.Level) (levels.Level, bool) {
	c := levels.Level(p.MaxLevel.rank())
	if c == 0 {
		return 0, false
	}
	return min(l, c), true
}

// Always is the tool left at max_level = "none": the one that says so.
const Always = "task_info"

// Refusal says why p removes the tool name from a server at level l, or ""
// when the tool stays (approval aside: see NeedsApproval).
func (p Policy) Refusal(name string, l levels.Level) string {
	eff, ok := p.Effective(l)
	switch {
	case !ok && name == Always:
		return ""
	case !ok:
		return "the task's agent policy is max_level = \"none\": no agent access to this session (for example during an exam)"
	case !levels.Has(name, eff):
		return fmt.Sprintf("the task's agent policy caps agents at max_level = %q, which has no %s", p.MaxLevel, name)
	case name == "nvim_buffer_edit" && p.Edits == EditsNone:
		return "the task's agent policy is edits = \"none\": agents do not edit the student's files here"
	case name == "proposal_status" && p.Edits == EditsNone:
		return "the task's agent policy is edits = \"none\": agents make no edits here, and no proposals"
	case name == "nvim_hint" && !p.Hints:
		return "the task's agent policy is hints = false: no notes in the student's editor"
	}
	return ""
}

// NeedsApproval reports whether a call of name waits for the student.
func (p Policy) NeedsApproval(name string) bool { return slices.Contains(p.Approve, name) }

// Tools lists the tools a server at l offers under p, in l's order.
func (p Policy) Tools(l levels.Level) []string {
	var out []string
	for _, n := range levels.ToolNames(l) {
		if p.Refusal(n, l) == "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Meet is the stricter of a and b in every part: the policy recorded when
// the instance was made meets the card's current one, so a change to
// stem.toml made from inside the container can tighten the policy but
// never loosen it.
func Meet(a, b Policy) Policy {
	out := a
	if b.MaxLevel.rank() < a.MaxLevel.rank() {
		out.MaxLevel = b.MaxLevel
	}
	if b.Edits.rank() < a.Edits.rank() {
		out.Edits = b.Edits
	}
	out.Hints = a.Hints && b.Hints
	out.Approve = slices.Clone(a.Approve)
	for _, n := range b.Approve {
		if !slices.Contains(out.Approve, n) {
			out.Approve = append(out.Approve, n)
		}
	}
	return out
}

// Describe says in one paragraph what p allows an agent at level l.
func (p Policy) Describe(l levels.Level) string {
	if p.IsDefault() {
		return "The task sets no agent policy: the level alone decides."
	}
	eff, ok := p.Effective(l)
	if !ok {
		return "The task's agent policy is max_level = \"none\" (for example an exam): no agent may read or act in this session; only task_info answers."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The task's agent policy caps agents at %s (this server works at %s).", p.MaxLevel, eff)
	switch p.Edits {
	case EditsNone:
		b.WriteString(" No edits to the student's files: explain, point, or leave a hint instead.")
	case EditsPropose:
		b.WriteString(" Edits are proposed, not made: nvim_buffer_edit shows the change to the student, who accepts or rejects it on their machine; proposal_status tells you which.")
	}
	if !p.Hints {
		b.WriteString(" No hints in the editor.")
	}
	if len(p.Approve) > 0 {
		fmt.Fprintf(&b, " These tools need the student's approval for each call: %s.", strings.Join(p.Approve, ", "))
	}
	return b.String()
}

// String is p in one line, the approve list sorted (two equal policies
// print alike).
func (p Policy) String() string {
	a := slices.Clone(p.Approve)
	slices.Sort(a)
	return fmt.Sprintf("max_level=%s edits=%s hints=%t approve=[%s]", p.MaxLevel, p.Edits, p.Hints, strings.Join(a, " "))
}
