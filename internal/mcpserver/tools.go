package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/termtext"
)

// toolDef is one tool definition. A tool exists only at the levels it is
// registered for: a lower-level server never even lists it, so there is
// nothing to bypass.
type toolDef struct {
	// min and max (0: no upper bound) are the levels that have this
	// definition, filled in from levels' table by allTools: definitions
	// do not state them. A tool whose behaviour differs per level is
	// defined once per range.
	min, max Level
	tool     mcp.Tool
	effect   bool // changes the session: audited on every call
	// clean passes every string of the result through termtext (see
	// cleanJSON): for results built field by field from student text.
	clean   bool
	timeout time.Duration
	run     func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error)
}

func (d toolDef) at(l Level) bool {
	return l >= d.min && (d.max == 0 || l <= d.max)
}

// ToolNames lists the tools a server at level l exposes (sorted as defined).
func ToolNames(l Level) []string {
	var names []string
	for _, d := range allTools() {
		if d.at(l) {
			names = append(names, d.tool.Name)
		}
	}
	return names
}

func (s *Server) register() {
	// One registration per name, with every definition of it up to this
	// level: the task's agent policy may call for a lower level's (see
	// pick).
	s.defs = map[string][]toolDef{}
	var order []string
	for _, d := range allTools() {
		if d.min > s.opt.Level {
			continue
		}
		d.tool = rawSchema(d.tool)
		if _, ok := s.defs[d.tool.Name]; !ok {
			order = append(order, d.tool.Name)
		}
		s.defs[d.tool.Name] = append(s.defs[d.tool.Name], d)
	}
	for _, name := range order {
		defs := s.defs[name]
		var top toolDef
		for _, d := range defs {
			if d.at(s.opt.Level) {
				top = d
			}
		}
		if top.run == nil {
			delete(s.defs, name)
			continue
		}
		s.mcp.AddTool(top.tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.call(ctx, defs, req)
		})
	}
	if s.opt.GateStatus != nil {
		for _, d := range gateTools() {
			if !d.at(s.opt.Level) {
				continue
			}
			d.tool = rawSchema(d.tool)
			s.mcp.AddTool(d.tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.call(ctx, []toolDef{d}, req)
			})
		}
	}
	s.registerResources()
}

// rawSchema serializes a tool's input schema once, strict (no unknown
// arguments). mcp-go's validator re-marshals a structured schema on every
// call (15% of a pane capture's CPU); a raw one it only hashes.
func rawSchema(t mcp.Tool) mcp.Tool {
	if len(t.RawInputSchema) > 0 {
		return t
	}
	sch := t.InputSchema
	sch.AdditionalProperties = false
	if sch.Properties == nil {
		sch.Properties = map[string]any{}
	}
	data, err := json.Marshal(sch)
	if err != nil {
		return t // the structured schema still works, only slower
	}
	t.RawInputSchema = data
	t.InputSchema = mcp.ToolInputSchema{}
	return t
}

// defaultToolTimeout bounds a call of a tool without its own timeout.
const defaultToolTimeout = 15 * time.Second

// call runs a tool with a deadline, audits it, and turns errors into tool
// errors (isError results) so the session always goes on.
//
// Auditing fails closed: an effectful tool runs only once its intent (tool,
// argument digest, level, account, instance, container id) is in the audit
// log, and its outcome (ok, error or refused, with the duration) follows
// under a context of its own, so a cancelled call is still recorded.
// Read-only tools are not audited unless they are refused.
func (s *Server) call(ctx context.Context, defs []toolDef, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx = withCallFacts(ctx) // the transport's, or one for this call
	d := defs[len(defs)-1]
	timeout := slices.MaxFunc(defs, func(a, b toolDef) int { return cmp.Compare(a.timeout, b.timeout) }).timeout
	if timeout == 0 {
		timeout = defaultToolTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.begin() // a client that skipped notifications/initialized
	select {
	case <-s.started:
	case <-ctx.Done():
	}
	if err := s.refusal(); err != nil {
		// The session's start could not be audited: nothing is served.
		s.endServe()
		return ErrorResult(errcode.NotAudited, fmt.Sprintf("%s refused: %v", d.tool.Name, err)), nil
	}
	if ctx.Err() != nil {
		return toolError(d.tool.Name, ctx.Err()), nil
	}
	// The digest names the arguments in audit entries; a read that is
	// neither refused nor asked about writes none, so it is not taken.
	digest := sync.OnceValue(func() string { return audit.Digest(req.GetRawArguments()) })
	d, err := s.pick(ctx, defs)
	if err != nil {
		if isRefusal(err) {
			e := s.callEntry(audit.Refused, d.tool.Name, digest())
			e.Result, e.Detail = "refused", err.Error()
			s.appendAudit(context.WithoutCancel(ctx), e)
		}
		return toolError(d.tool.Name, err), nil
	}
	if asked, err := s.approval(parent, d, req, digest); err != nil {
		return toolError(d.tool.Name, err), nil
	} else if asked {
		// The student's time to answer is not the tool's.
		ctx, cancel = context.WithTimeout(parent, timeout)
		defer cancel()
	}
	var intent audit.Entry
	if d.effect {
		// Reads may use a verification up to reverifyEvery old; an effect
		// goes only to a container verified just now (registry record,
		// full id, label, live sockets) whose card is safe for git on the
		// host, so the intent names it.
		c, err := s.verifyNow(ctx)
		if err == nil {
			err = cardGitGate(ctx, *c.target())
		}
		if err != nil {
			if isRefusal(err) {
				e := s.callEntry(audit.Refused, d.tool.Name, digest())
				e.Result, e.Detail = "refused", err.Error()
				s.appendAudit(context.WithoutCancel(ctx), e)
			}
			return toolError(d.tool.Name, err), nil
		}
		e := s.callEntry(audit.ToolIntent, d.tool.Name, digest())
		actx, acancel := context.WithTimeout(ctx, auditTimeout)
		written, err := s.audit.Append(actx, e)
		acancel()
		if err != nil {
			if ctx.Err() != nil {
				return toolError(d.tool.Name, ctx.Err()), nil
			}
			s.logf("%s refused: %v", d.tool.Name, err)
			return ErrorResult(errcode.NotAudited, fmt.Sprintf("%s refused: nothing was done, because %v", d.tool.Name, err)), nil
		}
		intent = written
	}
	start := time.Now()
	out, err := d.run(ctx, s, req)
	err = s.explainPart(err)
	if err == nil && d.clean {
		out, err = cleanJSON(out)
	}
	refused := isRefusal(err)
	if d.effect || refused {
		e := s.callEntry(audit.ToolCall, d.tool.Name, digest())
		if d.effect {
			e.Intent, e.Duration = intent.Seq, time.Since(start).Round(time.Microsecond).String()
		}
		switch {
		case refused:
			e.Event, e.Result, e.Detail = audit.Refused, "refused", err.Error()
		case err != nil:
			e.Result, e.Detail = "error", err.Error()
		default:
			e.Result = "ok"
		}
		// The call is over whether or not its context was cancelled; its
		// outcome is recorded all the same.
		s.appendAudit(context.WithoutCancel(ctx), e)
	}
	if err != nil {
		return toolError(d.tool.Name, err), nil
	}
	return resultOf(out)
}

// callEntry is an audit entry about a call of tool on the instance the
// session is connected to.
func (s *Server) callEntry(event, tool, digest string) audit.Entry {
	e := s.entry(event)
	e.Tool, e.ArgsDigest = tool, digest
	if c := s.current(); c != nil {
		e.Instance, e.ContainerID = c.target().Record.Instance, c.target().Record.ContainerID
	}
	return e
}

// toolError is the result of a call that failed with err: its text, and
// its code as structured content (see ErrorResult).
func toolError(tool string, err error) *mcp.CallToolResult {
	// gdb, Neovim and tmux quote the session's text in their errors.
	return ErrorResult(errcode.Of(err), termtext.String(toolErrorText(tool, err)))
}

// ErrorResult is a tool error: text for whoever reads it, and the same
// with its code as structured content, for a client to act on without
// reading the text ({"error":{"code":...,"message":...}}).
func ErrorResult(code errcode.Code, text string) *mcp.CallToolResult {
	res := mcp.NewToolResultError(text)
	res.StructuredContent = errcode.Wire{Error: errcode.WireError{Code: code, Message: text}}
	return res
}

func toolErrorText(tool string, err error) string {
	switch code := errcode.Of(err); code {
	case errcode.PolicyRefused, errcode.ApprovalRefused, errcode.ApprovalExpired, errcode.NoWatcher,
		errcode.NotGranted, errcode.UnsafeCard, errcode.NotAudited:
		// These say what was (not) done themselves.
		return fmt.Sprintf("%s refused: %v", tool, err)
	case errcode.Timeout:
		return fmt.Sprintf("%s: timed out", tool)
	default:
		if errcode.IsRefusal(code) {
			return fmt.Sprintf("%s refused: %v (nothing was changed)", tool, err)
		}
	}
	return fmt.Sprintf("%s: %v", tool, err)
}

// Annotations ----------------------------------------------------------------

func readOnly() mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: ptr(true), DestructiveHint: ptr(false), IdempotentHint: ptr(true), OpenWorldHint: ptr(false)})
}

func mutating(destructive bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: ptr(false), DestructiveHint: ptr(destructive), IdempotentHint: ptr(false), OpenWorldHint: ptr(false)})
}

func ptr[T any](v T) *T { return &v }

// sharedNote is appended to descriptions of tools that act on the session.
const sharedNote = " The student (and possibly a teacher) work in this session at the same time and nothing arbitrates between clients: check the state first."

// Argument helpers -------------------------------------------------------------

func args(req mcp.CallToolRequest) map[string]any {
	if m := req.GetArguments(); m != nil {
		return m
	}
	return map[string]any{}
}

func optString(req mcp.CallToolRequest, key string) (string, bool, error) {
	v, ok := args(req)[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, badInput("%s must be a string", key)
	}
	return s, true, nil
}

func reqString(req mcp.CallToolRequest, key string) (string, error) {
	s, ok, err := optString(req, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", badInput("%s is required", key)
	}
	return s, nil
}

func optInt(req mcp.CallToolRequest, key string, def, min, max int) (int, error) {
	v, ok := args(req)[key]
	if !ok || v == nil {
		return def, nil
	}
	f, isNum := v.(float64)
	if !isNum || f != float64(int64(f)) {
		return 0, badInput("%s must be an integer", key)
	}
	n := int(f)
	if n < min || n > max {
		return 0, badInput("%s must be between %d and %d", key, min, max)
	}
	return n, nil
}

func optBool(req mcp.CallToolRequest, key string, def bool) (bool, error) {
	v, ok := args(req)[key]
	if !ok || v == nil {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, badInput("%s must be true or false", key)
	}
	return b, nil
}

func optStrings(req mcp.CallToolRequest, key string, maxItems, maxBytes int) ([]string, bool, error) {
	v, ok := args(req)[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false, badInput("%s must be an array of strings", key)
	}
	if len(list) > maxItems {
		return nil, false, refusedAs(errcode.TooLarge, "%s has %d items; the limit is %d", key, len(list), maxItems)
	}
	out := make([]string, len(list))
	total := 0
	for i, it := range list {
		s, isStr := it.(string)
		if !isStr {
			return nil, false, badInput("%s[%d] must be a string", key, i)
		}
		total += len(s) + 1
		if total > maxBytes {
			return nil, false, refusedAs(errcode.TooLarge, "%s is larger than %d bytes", key, maxBytes)
		}
		out[i] = s
	}
	return out, true, nil
}

// oneLine clips text for error messages about hostile input.
func oneLine(s string) string { return termtext.OneLine(s, 80) }
