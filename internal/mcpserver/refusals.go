package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stem-edu/stem/internal/audit"
)

// schemaRefusal starts the tool error mcp-go returns when arguments fail a
// tool's input schema (unknown arguments, wrong types, limits). Our own
// handlers never produce it: their errors start with the tool's name.
const schemaRefusal = "input schema validation failed"

// refusalHooks audit the calls refused before a tool's handler runs, which
// Server.call never sees: arguments the schema rejects, and tools this
// level does not have (a lower-level server calling a higher level's tool
// is exactly what the audit log is for).
func (s *Server) refusalHooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddAfterCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest, result any) {
		res, ok := result.(*mcp.CallToolResult)
		if !ok || !res.IsError || len(res.Content) == 0 {
			return
		}
		if tc, ok := res.Content[0].(mcp.TextContent); ok && strings.HasPrefix(tc.Text, schemaRefusal) {
			s.auditRefused(ctx, req, tc.Text)
		}
	})
	h.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, err error) {
		req, ok := message.(*mcp.CallToolRequest)
		if method != mcp.MethodToolsCall || !ok || !errors.Is(err, server.ErrToolNotFound) {
			return
		}
		s.auditRefused(ctx, req, fmt.Sprintf("%s is not a tool at level %s", oneLine(req.Params.Name), s.opt.Level))
	})
	return h
}

func (s *Server) auditRefused(ctx context.Context, req *mcp.CallToolRequest, detail string) {
	// After session_start, like every other entry of the session (a
	// refusal may be the session's first call: start the verification as
	// a tool call would), but never held up for long: the refusal is
	// answered after this returns.
	s.begin()
	select {
	case <-s.started:
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	e := s.entry(audit.Refused)
	e.Tool = oneLine(req.Params.Name) // the client's text: clipped
	e.ArgsDigest = audit.Digest(req.GetRawArguments())
	e.Result, e.Detail = "refused", detail
	if c := s.current(); c != nil {
		e.Instance, e.ContainerID = c.target.Record.Instance, c.target.Record.ContainerID
	}
	s.appendAudit(context.WithoutCancel(ctx), e)
}
