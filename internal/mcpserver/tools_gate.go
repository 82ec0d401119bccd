package mcpserver

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/levels"
)

// GateStatusTool is the name of the tool a gate-served session adds.
const GateStatusTool = "gate_status"

// gateStatusTool is the SSH gate's status verb as a tool of the session the
// gate serves: the same answer for the same grant (the allowed instances,
// whether tmux and Neovim answer, the grant's name, level and expiry), so
// a teacher's open session can poll it without a new SSH connection. It
// takes its level range from levels' gate table, as every tool takes its
// own from levels' table. The gate audits each call; the server audits
// only its refusals.
func gateStatusTool() toolDef {
	return toolDef{
		clean: true, timeout: 10 * time.Second,
		tool: mcp.NewTool(GateStatusTool,
			mcp.WithDescription("The SSH gate's status for this grant: the account, the grant's name, level and expiry, and each instance the grant allows with whether its tmux and Neovim answer. The same as the gate's status verb; each call is written to the student's audit log."),
			readOnly()),
		run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
			return s.opt.GateStatus(ctx)
		},
	}
}

// gateTools returns the gate-only definitions with their ranges from
// levels' gate table, in its order; like allTools, a definition the table
// does not name exists at no level.
func gateTools() []toolDef {
	return withLevels([]toolDef{gateStatusTool()}, levels.GateTools())
}

// Tools returns the definitions of the tools a server at level l offers
// (as ToolNames lists them), for a server that forwards to one, such as
// the teacher's class server. The gate-only gate_status is not among them.
func Tools(l Level) []mcp.Tool {
	var out []mcp.Tool
	for _, d := range allTools() {
		if d.at(l) {
			out = append(out, d.tool)
		}
	}
	return out
}

// ToolTimeout is how long the server lets one call of the named tool run
// (the default for tools without their own), so that a forwarder can wait
// as long; 0 for an unknown tool.
func ToolTimeout(name string) time.Duration {
	for _, d := range allTools() {
		if d.tool.Name == name {
			if d.timeout == 0 {
				return defaultToolTimeout
			}
			return d.timeout
		}
	}
	return 0
}
