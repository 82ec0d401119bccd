// Package mcp groups `stemctl mcp select|list|status|call`.
package mcp

import (
	"github.com/spf13/cobra"

	mcpcall "github.com/stem-edu/stem/internal/cmd/mcp/call"
	mcplist "github.com/stem-edu/stem/internal/cmd/mcp/list"
	mcpselect "github.com/stem-edu/stem/internal/cmd/mcp/select"
	mcpstatus "github.com/stem-edu/stem/internal/cmd/mcp/status"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// NewCmdMCP builds the group.
func NewCmdMCP(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp <command>",
		Short: "Choose which instance MCP providers talk to",
		Long: `A long-lived MCP provider on this machine (stem-mcp serve without --instance)
always talks to the instance selected here, through the fixed paths
$XDG_RUNTIME_DIR/stem/mcp-selected/current/{t,n}.sock. Switching the selection
moves the provider's next call to another session without restarting the agent.`,
	}
	cmd.AddCommand(
		mcpselect.NewCmdSelect(f, nil),
		mcplist.NewCmdList(f, nil),
		mcpstatus.NewCmdStatus(f, nil),
		mcpcall.NewCmdCall(f, nil),
	)
	return cmd
}
