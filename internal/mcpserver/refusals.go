package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
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
			text := tc.Text
			if words := s.schemas.explain(s.mcp, req); words != "" {
				text = words
			}
			// The response is built from res after this hook.
			*res = *ErrorResult(errcode.BadInput, text)
			s.auditRefused(ctx, req, text)
		}
	})
	h.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, err error) {
		req, ok := message.(*mcp.CallToolRequest)
		if method != mcp.MethodToolsCall || !ok || !errors.Is(err, server.ErrToolNotFound) {
			return
		}
		detail := fmt.Sprintf("%s is not a tool at level %s", oneLine(req.Params.Name), s.opt.Level)
		if r := s.policyRefusal(req.Params.Name); r != "" {
			detail = oneLine(req.Params.Name) + ": " + r
		}
		s.auditRefused(ctx, req, detail)
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
		e.Instance, e.ContainerID = c.target().Record.Instance, c.target().Record.ContainerID
	}
	s.appendAudit(context.WithoutCancel(ctx), e)
}

// schemaExplainer restates mcp-go's schema refusals in words. mcp-go prints
// the validator's Go structs ("/pane: &{Got:number Want:[string]}"); the
// validator itself can say "pane: got number, want string". It validates
// the refused arguments again against the tool's registered (strict)
// schema, compiled once per tool, so what is refused stays mcp-go's call.
type schemaExplainer struct {
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

func (e *schemaExplainer) schema(t mcp.Tool) (*jsonschema.Schema, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if sch, ok := e.compiled[t.Name]; ok {
		return sch, nil
	}
	raw := t.RawInputSchema
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(t.InputSchema); err != nil {
			return nil, err
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("stem-tool.json", doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile("stem-tool.json")
	if err != nil {
		return nil, err
	}
	if e.compiled == nil {
		e.compiled = map[string]*jsonschema.Schema{}
	}
	e.compiled[t.Name] = sch
	return sch, nil
}

// explain returns the refusal in words, or "" if it cannot say more than
// mcp-go did.
func (e *schemaExplainer) explain(srv *server.MCPServer, req *mcp.CallToolRequest) string {
	st := srv.GetTool(req.Params.Name)
	if st == nil {
		return ""
	}
	sch, err := e.schema(st.Tool)
	if err != nil {
		return ""
	}
	args, err := json.Marshal(req.GetRawArguments())
	if err != nil || string(args) == "null" {
		args = []byte("{}")
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return ""
	}
	var verr *jsonschema.ValidationError
	if !errors.As(sch.Validate(value), &verr) {
		return ""
	}
	p := message.NewPrinter(language.English)
	var parts []string
	var leaves func(v *jsonschema.ValidationError)
	leaves = func(v *jsonschema.ValidationError) {
		if len(v.Causes) > 0 {
			for _, c := range v.Causes {
				leaves(c)
			}
			return
		}
		where := "arguments"
		if len(v.InstanceLocation) > 0 {
			where = strings.Join(v.InstanceLocation, "/")
		}
		// The client's text (argument names) is clipped: a megabyte of
		// name must not come back or reach the audit log whole.
		parts = append(parts, oneLine(where+": "+v.ErrorKind.LocalizedString(p)))
	}
	leaves(verr)
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("and %d more", len(parts)-8))
	}
	msg := schemaRefusal + ": " + strings.Join(parts, "; ")
	if names := slices.Sorted(maps.Keys(sch.Properties)); len(names) > 0 {
		msg += fmt.Sprintf(" (%s takes: %s)", st.Tool.Name, strings.Join(names, ", "))
	} else {
		msg += fmt.Sprintf(" (%s takes no arguments)", st.Tool.Name)
	}
	return msg
}
