package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/stem-edu/stem/internal/agentpolicy"
)

// Agents is the `agents` table of a task or of [defaults]: the task's
// policy for AI agents (see package agentpolicy). A key left out takes
// the card's default, then agentpolicy.Default.
type Agents struct {
	MaxLevel *agentpolicy.Cap        `toml:"max_level" json:"max_level,omitempty"`
	Edits    *agentpolicy.Edits      `toml:"edits" json:"edits,omitempty"`
	Hints    *bool                   `toml:"hints" json:"hints,omitempty"`
	Approve  *[]agentpolicy.ToolName `toml:"approve" json:"approve,omitempty"`
}

// Defaults is the [defaults] table: commands and the agent policy every
// task starts from.
type Defaults struct {
	Commands
	Agents *Agents `toml:"agents" json:"agents,omitempty"`
}

// apply sets on p what a says.
func (a *Agents) apply(p agentpolicy.Policy) agentpolicy.Policy {
	if a == nil {
		return p
	}
	if a.MaxLevel != nil {
		p.MaxLevel = *a.MaxLevel
	}
	if a.Edits != nil {
		p.Edits = *a.Edits
	}
	if a.Hints != nil {
		p.Hints = *a.Hints
	}
	if a.Approve != nil {
		p.Approve = make([]string, 0, len(*a.Approve))
		for _, n := range *a.Approve {
			p.Approve = append(p.Approve, string(n))
		}
	}
	return p
}

// AgentPolicy is the agent policy in force for t: the card's defaults,
// then the task's own table. Edits other than direct lower the default
// max_level to assist: at full an agent edits through shell and Ex
// commands, which no policy on stem's edit tool can hold back (validate
// refuses max_level = "full" written next to them).
func (m *Manifest) AgentPolicy(t *Task) agentpolicy.Policy {
	p := t.Agents.apply(m.Defaults.Agents.apply(agentpolicy.Default()))
	if p.Edits != agentpolicy.EditsDirect && p.MaxLevel == agentpolicy.CapFull {
		p.MaxLevel = agentpolicy.CapAssist
	}
	return p
}

// checkAgents refuses max_level = "full" set with edits other than
// direct; data is the manifest, to name the line.
func (m *Manifest) checkAgents(data []byte) error {
	for i := range m.Tasks {
		t := &m.Tasks[i]
		maxFrom, editsFrom := i, i
		if t.Agents == nil || t.Agents.MaxLevel == nil {
			maxFrom = -1
		}
		if t.Agents == nil || t.Agents.Edits == nil {
			editsFrom = -1
		}
		raw := t.Agents.apply(m.Defaults.Agents.apply(agentpolicy.Default()))
		explicitFull := raw.MaxLevel == agentpolicy.CapFull && (maxFrom >= 0 || m.Defaults.Agents != nil && m.Defaults.Agents.MaxLevel != nil)
		if !explicitFull || raw.Edits == agentpolicy.EditsDirect {
			continue
		}
		where := "task " + t.ID
		if line := agentsKeyLine(data, editsFrom, "edits"); line > 0 {
			where = fmt.Sprintf("line %d", line)
		}
		return fmt.Errorf("%s: edits = %q with max_level = \"full\" (from %s): a full agent edits through shell and Ex commands, which no edit policy holds back: set max_level = \"assist\" (or leave it out) in task %s's agents table",
			where, raw.Edits, tableName(maxFrom), t.ID)
	}
	return nil
}

func tableName(task int) string {
	if task < 0 {
		return "[defaults.agents]"
	}
	return "[tasks.agents]"
}

// agentsKeyLine finds the line (1-based) where the agents table of the
// task-th [[tasks]] (or of [defaults] when task < 0) sets key; 0 if not
// found. The TOML decoder keeps no positions; this reads the common
// forms: an [x.agents] table, `agents.key =`, and an inline table.
func agentsKeyLine(data []byte, task int, key string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), maxManifestBytes)
	section, n, line := "", -1, 0
	want := "defaults"
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(s, "[[") && strings.Contains(s, "]]"):
			section = strings.TrimSpace(s[2:strings.Index(s, "]]")])
			if section == "tasks" {
				n++
			}
			continue
		case strings.HasPrefix(s, "["):
			if j := strings.Index(s, "]"); j > 0 {
				section = strings.TrimSpace(s[1:j])
			}
			continue
		}
		if task >= 0 {
			want = "tasks"
			if n != task {
				continue
			}
		}
		setsKey := func(s string) bool {
			rest, ok := strings.CutPrefix(s, key)
			return ok && strings.HasPrefix(strings.TrimSpace(rest), "=")
		}
		switch {
		case section == want+".agents" && setsKey(s):
			return line
		case section == want && setsKey(strings.TrimPrefix(s, "agents.")) && strings.HasPrefix(s, "agents."):
			return line
		case section == want && strings.HasPrefix(s, "agents") && strings.Contains(s, "{") && strings.Contains(s, key):
			return line
		}
	}
	return 0
}
