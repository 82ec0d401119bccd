package agent

import (
	"fmt"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// taskPolicy is the agent policy in force for a request: the task's, met
// with the one recorded when the instance was made (as stem-mcp does).
func taskPolicy(rec registry.Record, r *workspace.Resolved) agentpolicy.Policy {
	p := agentpolicy.Default()
	if r != nil {
		p = r.Policy
	}
	if rec.Policy != nil {
		p = agentpolicy.Meet(*rec.Policy, p)
	}
	return p
}

// checkPolicy refuses to start an agent the task's policy gives no access.
func checkPolicy(req Request) (*agentpolicy.Policy, error) {
	p := taskPolicy(req.Target.Record, req.Resolved)
	if _, ok := p.Effective(req.Level); !ok {
		return nil, fmt.Errorf("task %s of %s/%s sets max_level = \"none\" for agents (for example an exam): no agent may work on it; the teacher changes that in the card's stem.toml", req.Resolved.TaskID, req.Resolved.Series, req.Resolved.Card)
	}
	return &p, nil
}

// policyText is the context's sentence on the policy ("" for none).
func policyText(p agentpolicy.Policy, l levels.Level) string {
	if p.IsDefault() {
		return ""
	}
	if eff, ok := p.Effective(l); ok && eff >= levels.Assist && p.Edits == agentpolicy.EditsDirect {
		return p.Describe(l)
	}
	return p.Describe(l) + " Your own tools may not edit the card either."
}
