package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/filestamp"
	"github.com/stem-edu/stem/internal/workspace"
)

// The task's agent policy (stem.toml's agents table) caps this server on
// top of its level. It is enforced where the level is: the tool filter
// keeps what the policy removes out of tools/list and makes mcp-go answer
// a call of it as an unknown tool, and call picks the definition of the
// policy's level (pane_send_keys at assist is not full's) and refuses
// again, should the instance have changed between the two.

// policyCache holds the card's policy, read again when stem.toml changes.
// The container writes stem.toml: the stamp is of the file that was read
// (its open descriptor), checked against the file now at the path, and a
// stamp that is not yet settled is not kept (internal/lib/filestamp).
type policyCache struct {
	mu             sync.Mutex
	cardPath, task string
	manifest       string // the card's stem.toml
	stamp          filestamp.Stamp
	pol            agentpolicy.Policy
	err            error
}

// policyFor is the policy in force for the instance of c: the card's
// current policy met with the one recorded when the instance was made and
// with the floor in the student's host record, so a stem.toml rewritten
// from inside the container can tighten it but never loosen it. A manifest that cannot be read leaves the recorded policy,
// or, for an instance recorded without one, observe.
func (s *Server) policyFor(c *conn) agentpolicy.Policy {
	r := c.target().Record
	live, err := s.pol.get(r.CardPath, r.Task)
	var p agentpolicy.Policy
	switch {
	case err != nil && r.Policy != nil:
		p = *r.Policy
	case err != nil:
		return failClosed
	case r.Policy != nil:
		p = agentpolicy.Meet(*r.Policy, live)
	default:
		p = live
	}
	// The floor in the student's host record holds whatever wrote the
	// registry's copy; a record that cannot be read leaves observe.
	floor, ferr := s.floorFor(r.Instance)
	switch {
	case ferr != nil:
		return failClosed
	case floor != nil:
		return agentpolicy.Meet(*floor, p)
	}
	return p
}

// failClosed is the policy when what decides it cannot be read.
var failClosed = agentpolicy.Policy{MaxLevel: agentpolicy.CapObserve, Edits: agentpolicy.EditsNone}

// levelFor is the level this server has for the instance once the task's
// policy has capped it: what rules by level (buffers outside the card,
// editable files) go by. A policy of none leaves the lowest.
func (s *Server) levelFor(c *conn) Level {
	if eff, ok := s.policyFor(c).Effective(s.opt.Level); ok {
		return eff
	}
	return Observe
}

// get is the policy of task in the card's stem.toml as it is now.
func (pc *policyCache) get(cardPath, task string) (agentpolicy.Policy, error) {
	now := time.Now()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	same := pc.cardPath == cardPath && pc.task == task
	if !same {
		pc.cardPath, pc.task, pc.stamp = cardPath, task, filestamp.Stamp{}
		pc.manifest = filepath.Join(cardPath, workspace.ManifestName)
	}
	// The card's root is the registry's (trusted); only stem.toml itself
	// is the container's, and Lstat does not follow it.
	st, ok := filestamp.Lstat(pc.manifest)
	if ok && same && pc.stamp == st {
		return pc.pol, pc.err
	}
	p, fi, err := cardPolicy(cardPath, task)
	pc.stamp, pc.pol, pc.err = filestamp.Stamp{}, p, err
	if fi != nil {
		if read, ok := filestamp.Of(fi); ok && read.Settled(now) {
			pc.stamp = read
		}
	}
	return p, err
}

// cardPolicy reads the policy of task from the card's stem.toml, with the
// status of the file it read (nil if none was opened).
func cardPolicy(cardPath, task string) (agentpolicy.Policy, os.FileInfo, error) {
	m, fi, err := workspace.LoadManifestInfo(cardPath)
	if err != nil {
		return agentpolicy.Policy{}, fi, err
	}
	t, ok := m.Task(task)
	if !ok {
		return agentpolicy.Policy{}, fi, fmt.Errorf("task %s is no longer in the card's manifest", task)
	}
	return m.AgentPolicy(t), fi, nil
}

// pick returns the definition of a call under the policy of the instance
// the session talks to, or why the policy refuses it. defs are the
// definitions of one tool name this server has, lowest level first.
func (s *Server) pick(ctx context.Context, defs []toolDef) (toolDef, error) {
	top := defs[len(defs)-1]
	if top.tool.Name == GateStatusTool {
		return top, nil // the grant's own status, as its verb: no agent access
	}
	c, err := s.target(ctx)
	if err != nil {
		return top, err
	}
	p := s.callPolicy(ctx, c)
	name := top.tool.Name
	if r := p.Refusal(name, s.opt.Level); r != "" {
		return top, policyRefusal(r)
	}
	eff, ok := p.Effective(s.opt.Level)
	if !ok {
		eff = Observe // the one tool left at none (task_info) is an observe tool
	}
	for _, d := range defs {
		if d.at(eff) {
			return d, nil
		}
	}
	return top, policyRefusal(fmt.Sprintf("the task's agent policy leaves no %s at %s", name, eff))
}

// policyRefusal is a call the task's agent policy does not allow: a
// refusal, audited as such.
func policyRefusal(reason string) error {
	return errcode.New(errcode.PolicyRefused, errors.New(reason))
}

// filterTools is the server's tool filter: tools/list and every call
// see only what the level and the policy leave, each tool as defined at
// the policy's level. Before an instance is known nothing is removed:
// calls then fail for want of an instance, and call checks again.
func (s *Server) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	s.begin()
	select {
	case <-s.started:
	case <-ctx.Done():
		return tools
	}
	c, err := s.target(ctx)
	if err != nil {
		return tools
	}
	p := s.callPolicy(ctx, c)
	eff, ok := p.Effective(s.opt.Level)
	if !ok {
		eff = Observe
	}
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Name == GateStatusTool {
			out = append(out, t) // what the grant's status verb gives anyway
			continue
		}
		if p.Refusal(t.Name, s.opt.Level) != "" {
			continue
		}
		for _, d := range s.defs[t.Name] {
			if d.at(eff) {
				t = d.tool
				break
			}
		}
		out = append(out, t)
	}
	return out
}

// policyRefusal says why the policy of the current instance removes
// name, or "" (for the audit of a call mcp-go refused as unknown).
func (s *Server) policyRefusal(name string) string {
	c := s.current()
	if c == nil || !levels.Has(name, s.opt.Level) {
		return "" // not a tool at this level at all: the level says why
	}
	return s.policyFor(c).Refusal(name, s.opt.Level)
}
