package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/verify"
)

// Approvals: a call of a tool the task's agent policy lists in approve
// waits for the student's yes or no, asked on the host
// (internal/decision): `stemctl attach` shows it in a line of its own
// below the container's screen and reads the answer from the student's
// real keyboard, or `stemctl approvals` answers it. Nothing in the
// container — its tmux and clients, its Neovim, the card — can answer,
// because the question and its answer never pass through it. Each answer
// covers one call; no answer within the timeout is a no. The request, the
// decision (with the host input that gave it) and an expiry are in the
// audit log; the request is written before the student is asked, so an
// approval that cannot be audited is never asked for.

const (
	defaultApprovalTimeout = time.Minute
	maxActionText          = 160
	// approveWhile is how long the student's "allow it all for a while"
	// covers every approval of this client (one agent, one teacher grant).
	approveWhile = 10 * time.Minute
)

// approvedUntil is when the student's "for a while" approval of this
// client ends (zero: none).
func (s *Server) approvedUntil() time.Time {
	s.approveMu.Lock()
	defer s.approveMu.Unlock()
	return s.approved
}

func (s *Server) approveFor(d time.Duration) time.Time {
	s.approveMu.Lock()
	defer s.approveMu.Unlock()
	s.approved = time.Now().Add(d)
	return s.approved
}

// approval asks the student about one call of d when the policy wants it:
// asked reports whether it did; err is a refusal (denied, expired, or the
// student could not be asked).
func (s *Server) approval(ctx context.Context, d toolDef, req mcp.CallToolRequest, digest func() string) (asked bool, err error) {
	c := s.current()
	if c == nil || !s.callPolicy(ctx, c).NeedsApproval(d.tool.Name) {
		return false, nil
	}
	if until := s.approvedUntil(); time.Now().Before(until) {
		e := s.callEntry(audit.ApprovalDecision, d.tool.Name, digest())
		e.Result, e.Detail = "granted", "the student allowed this client until "+until.UTC().Format(time.TimeOnly)+" UTC: "+actionText(d.tool.Name, req)
		s.appendAudit(context.WithoutCancel(ctx), e)
		return false, nil
	}
	ttl := s.opt.ApprovalTimeout
	if ttl <= 0 {
		ttl = defaultApprovalTimeout
	}
	action := actionText(d.tool.Name, req)
	spool, err := decision.Open(s.dirs.State, c.target().Record.Instance)
	if err != nil {
		return true, errcode.Errorf(errcode.NoWatcher, "the task's agent policy wants the student's approval, which cannot be asked for (%v): nothing was done", err)
	}
	e := s.callEntry(audit.ApprovalRequest, d.tool.Name, digest())
	e.Detail = s.requester() + " wants " + action
	actx, cancel := context.WithTimeout(ctx, auditTimeout)
	request, err := s.audit.Append(actx, e)
	cancel()
	if err != nil {
		return true, errcode.Errorf(errcode.NotAudited, "the task's agent policy wants the student's approval, which cannot be recorded (%v): nothing was done", err)
	}
	closing := func(event, result, detail string) {
		e := s.callEntry(event, d.tool.Name, digest())
		e.Intent, e.Result, e.Detail = request.Seq, result, detail
		s.appendAudit(context.WithoutCancel(ctx), e)
	}
	q := decision.Question{
		Kind:    "approval",
		From:    s.requester(),
		Text:    s.requester() + " wants " + action,
		Choices: []decision.Choice{decision.Yes, decision.No, decision.While},
		Expires: time.Now().Add(ttl),
	}
	ans, err := spool.Ask(ctx, q)
	switch {
	case err == nil && ans.Choice == decision.Yes:
		closing(audit.ApprovalDecision, "granted", "the student, at "+ans.Input)
		return true, nil
	case err == nil && ans.Choice == decision.While:
		until := s.approveFor(approveWhile)
		closing(audit.ApprovalDecision, "granted", fmt.Sprintf("the student, at %s, for this client until %s UTC", ans.Input, until.UTC().Format(time.TimeOnly)))
		return true, nil
	case err == nil:
		closing(audit.ApprovalDecision, "denied", "the student, at "+ans.Input)
		return true, errcode.Errorf(errcode.ApprovalRefused, "the student said no to this %s call: nothing was done", d.tool.Name)
	case errors.Is(err, decision.ErrNobodyToAsk):
		closing(audit.ApprovalDecision, "refused", "could not ask: "+err.Error())
		return true, errcode.Errorf(errcode.NoWatcher, "the task's agent policy wants the student's approval for %s, and %v: nothing was done", d.tool.Name, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		closing(audit.ApprovalExpired, "refused", fmt.Sprintf("no answer within %s", ttl))
		return true, errcode.Errorf(errcode.ApprovalExpired, "the student did not answer within %s: nothing was done (ask again, or tell them what you want to do)", ttl)
	case ctx.Err() != nil:
		closing(audit.ApprovalExpired, "refused", "the call ended before the student answered")
		return true, ctx.Err()
	}
	closing(audit.ApprovalDecision, "refused", err.Error())
	return true, err
}

// join shows this server among the session's participants (the student's
// host line) while it serves t. A failure only costs the display.
func (s *Server) join(t verify.Target) func() {
	spool, err := decision.Open(s.dirs.State, t.Record.Instance)
	if err == nil {
		leave, err := spool.Join(s.requester(), s.opt.Level.String())
		if err == nil {
			return leave
		}
	}
	s.logf("instance %s: not shown among the participants: %v", t.Record.Instance, err)
	return nil
}

// requester names the client in the student's question.
func (s *Server) requester() string {
	id := s.opt.Identity
	switch {
	case id.Agent != "":
		return "agent " + termtext.OneLine(id.Agent, 24)
	case id.Grant != "":
		return "teacher " + termtext.OneLine(id.Grant, 40)
	}
	return "an AI agent (" + s.opt.Level.String() + ")"
}

// author is who the student sees named on a hint: the requester, with a
// teacher's grant by its name alone (the grant's id means nothing in the
// student's editor; approvals keep it).
func (s *Server) author() string {
	if g := s.opt.Identity.Grant; g != "" && s.opt.Identity.Agent == "" {
		name, _, _ := strings.Cut(g, ":")
		return "teacher " + termtext.OneLine(name, 40)
	}
	return s.requester()
}

// actionText is the exact action, one line, clipped: the tool and its
// arguments as the agent sent them (agent text: cleaned of anything a
// terminal would act on).
func actionText(tool string, req mcp.CallToolRequest) string {
	data, err := json.Marshal(req.GetRawArguments())
	if err != nil || string(data) == "null" {
		data = []byte("{}")
	}
	return tool + " " + termtext.OneLine(string(data), maxActionText)
}
