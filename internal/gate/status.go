package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/xdg"
)

// The status verb's JSON (package gatestatus, which the teacher's stemctl
// decodes without linking the gate).
type (
	Status         = gatestatus.Status
	SessionInfo    = gatestatus.SessionInfo
	InstanceStatus = gatestatus.InstanceStatus
)

// instances returns the registry records the grant allows, plus a bare
// entry for each named-but-unregistered instance.
func (s *session) instances(ctx context.Context) ([]InstanceStatus, []registry.Record, error) {
	d, err := xdg.Resolve(s.env)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve directories: %w", err)
	}
	reg, err := registry.Open(d.State)
	if err != nil {
		return nil, nil, err
	}
	recs, err := reg.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]registry.Record{}
	for _, r := range recs {
		byName[r.Instance] = r
	}
	var names []string
	if len(s.grant.Instances) > 0 {
		names = append(names, s.grant.Instances...)
	} else {
		for _, r := range recs {
			names = append(names, r.Instance)
		}
	}
	sort.Strings(names)
	out := make([]InstanceStatus, 0, len(names))
	var found []registry.Record
	for _, n := range names {
		r, ok := byName[n]
		is := InstanceStatus{Instance: n, Registered: ok}
		if ok {
			is.ContainerID, is.Profile = r.ContainerID, r.Profile
			is.Series, is.Card, is.Task, is.Target = r.Series, r.Card, r.Task, r.Target
			found = append(found, r)
		}
		out = append(out, is)
	}
	return out, found, nil
}

func (s *session) status(ctx context.Context) error {
	st, err := s.statusOf(ctx, "gate.status")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(s.opt.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(st)
}

// statusOf is the status verb's answer, audited under tool before it is
// returned: the verb (gate.status) and the MCP session's gate_status tool
// give the same thing to the same grant, each audited.
func (s *session) statusOf(ctx context.Context, tool string) (Status, error) {
	list, recs, err := s.instances(ctx)
	if err != nil {
		return Status{}, err
	}
	byName := map[string]registry.Record{}
	for _, r := range recs {
		byName[r.Instance] = r
	}
	tmux, nvim := s.opt.Tmux, s.opt.Nvim
	if tmux == nil {
		tmux = dialProbe
	}
	if nvim == nil {
		nvim = dialProbe
	}
	// Probe in parallel: a teacher polls many students and each probe may
	// wait for its timeout.
	done := make(chan struct{}, len(list))
	for i := range list {
		r, ok := byName[list[i].Instance]
		if !ok {
			list[i].Error = "not in the registry (not started on this account)"
			done <- struct{}{}
			continue
		}
		go func(is *InstanceStatus, r registry.Record) {
			defer func() { done <- struct{}{} }()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			terr := tmux(pctx, r.Dir().Tmux())
			nerr := nvim(pctx, r.Dir().Nvim())
			is.Tmux, is.Nvim = terr == nil, nerr == nil
			is.Answers = is.Tmux && is.Nvim
			if is.Tmux && s.opt.Activity != nil {
				if at, err := s.opt.Activity(pctx, r.Dir().Tmux()); err == nil && !at.IsZero() {
					at = at.UTC()
					is.Activity = &at
				}
			}
			if err := errors.Join(terr, nerr); err != nil {
				is.Error = termtext.Line(err.Error(), maxErrorLine)
			}
		}(&list[i], r)
	}
	for range list {
		<-done
	}
	s.addAgents(list)
	st := Status{
		Account: s.id.Account, Grant: s.grant.Name, Level: s.grant.Level, Instances: list,
		Session: SessionInfo{TTY: s.opt.Getenv("SSH_TTY") != "", AgentForwarded: s.opt.Getenv("SSH_AUTH_SOCK") != ""},
	}
	if !s.grant.Expires.IsZero() {
		t := s.grant.Expires.UTC()
		st.Expires = &t
	}
	// Audited before it is answered: a status that cannot be recorded is
	// not given.
	if err := s.audit(ctx, audit.Entry{Event: audit.ToolCall, Tool: tool, Level: s.grant.Level, Result: "ok"}); err != nil {
		return Status{}, s.unaudited("status not given", err)
	}
	return st, nil
}

func (s *session) list(ctx context.Context) error {
	list, _, err := s.instances(ctx)
	if err != nil {
		return err
	}
	if err := s.audit(ctx, audit.Entry{Event: audit.ToolCall, Tool: "gate.list", Level: s.grant.Level, Result: "ok"}); err != nil {
		return s.unaudited("list not given", err)
	}
	for _, is := range list {
		if _, err := fmt.Fprintln(s.opt.Out, is.Instance); err != nil {
			return err
		}
	}
	return nil
}

// dialProbe says a server answers if its socket accepts a connection. A
// symlink planted over the socket from the container is not followed.
func dialProbe(ctx context.Context, socket string) error {
	c, err := unixpin.Dial(ctx, socket)
	if err != nil {
		return fmt.Errorf("%s does not answer: %w", socket, err)
	}
	return c.Close()
}

// addAgents names the agents running in each listed instance, from the
// account's agent store (host files stemctl writes; the container has no
// access to them). A store that cannot be read leaves the lists empty.
func (s *session) addAgents(list []InstanceStatus) {
	d, err := xdg.Resolve(s.env)
	if err != nil {
		return
	}
	all, err := agentstore.NewStore(sockets.Layout{Runtime: d.Runtime}, d.State).List(false)
	if err != nil {
		return
	}
	for i := range list {
		for _, a := range all {
			if a.Instance != list[i].Instance || !a.Running {
				continue
			}
			list[i].Agents = append(list[i].Agents, gatestatus.Agent{
				Provider: termtext.Line(a.Provider, 40), Level: a.Level, Started: a.Started.UTC(),
				Problem: termtext.Line(a.Problem, maxErrorLine),
			})
		}
	}
}
