// Package audit groups `stemctl audit verify|show|blame`.
package audit

import (
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/audit/blame"
	"github.com/stem-edu/stem/internal/cmd/audit/show"
	"github.com/stem-edu/stem/internal/cmd/audit/verify"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// NewCmdAudit builds the group.
func NewCmdAudit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit <command>",
		Short: "Read and verify the hash-chained audit log of MCP sessions and actions, and who wrote a file",
	}
	cmd.AddCommand(verify.NewCmdVerify(f, nil), show.NewCmdShow(f, nil), blame.NewCmdBlame(f, nil))
	return cmd
}
