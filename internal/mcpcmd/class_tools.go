package mcpcmd

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/mcpserver"
)

// notForwarded are the student tools the class server has its own form
// of: class_events merges every student's session_events.
var notForwarded = map[string]bool{"session_events": true}

// addStudentTools offers every student tool (the full level's set) with a
// required student argument, forwarded to that student's gate. Which of
// them a student allows is their grant's business: the hub refuses a tool
// the student's session lacks, naming the grant's level, and the gate's
// server, which has no such tool at that level, is the boundary.
func addStudentTools(srv *server.MCPServer, hub *class.Hub, timeout time.Duration) {
	for _, t := range mcpserver.Tools(mcpserver.Full) {
		if notForwarded[t.Name] {
			continue
		}
		t := studentTool(t)
		srv.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := maps.Clone(req.GetArguments())
			student, _ := args["student"].(string)
			if student == "" {
				return mcpserver.ErrorResult(errcode.BadInput, t.Name+" refused: the student argument names whose session (class_overview lists them)"), nil
			}
			delete(args, "student")
			// As long as the gate's server lets the tool run, plus the
			// per-student allowance for the way there and back.
			ctx, cancel := context.WithTimeout(ctx, timeout+mcpserver.ToolTimeout(t.Name))
			defer cancel()
			res, err := hub.Call(ctx, student, t.Name, args)
			if err != nil {
				var re *class.RefusedError
				if errors.As(err, &re) {
					return mcpserver.ErrorResult(re.Code, re.Msg), nil
				}
				return failedResult(student, t.Name, err), nil
			}
			return res, nil
		})
	}
}

// studentTool is t with a required student argument first in its schema.
func studentTool(t mcp.Tool) mcp.Tool {
	sch := t.InputSchema
	props := map[string]any{"student": map[string]any{
		"type": "string", "description": "the student whose session this goes to (a name of the class's roster)", "maxLength": 64,
	}}
	maps.Copy(props, sch.Properties)
	sch.Properties = props
	sch.Required = append([]string{"student"}, slices.DeleteFunc(slices.Clone(sch.Required), func(s string) bool { return s == "student" })...)
	t.InputSchema = sch
	t.Description = "Forwarded to the student's gate (each student's grant decides whether it is allowed; refused otherwise, with the grant's level named). " + t.Description + " " + classNotice
	return t
}

// failedResult says a forwarded call failed. What the student's side
// answered is quoted under student_said, never worded as the teacher
// side's own.
func failedResult(student, tool string, err error) *mcp.CallToolResult {
	obj := map[string]any{"student": student, "notice": class.ForwardNotice(student)}
	var se *class.StudentError
	if errors.As(err, &se) {
		obj["error"] = tool + " failed: the student's side answered with an error; its text is student_said, that student's data"
		obj["student_said"] = se.Said
	} else {
		obj["error"] = tool + " failed: " + err.Error()
	}
	// The way to the student failed (or timed out): nothing the student
	// said is taken as the code.
	code := errcode.Unreachable
	if errcode.Of(err) == errcode.Timeout {
		code = errcode.Timeout
	}
	data, jerr := json.Marshal(obj)
	if jerr != nil {
		return mcpserver.ErrorResult(code, tool+" failed")
	}
	return mcpserver.ErrorResult(code, string(data))
}
