// Package lab implements `stemctl lab`, the administrator's commands for
// a lab's student accounts.
package lab

import (
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/doctor"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// NewCmdLab builds the command group.
func NewCmdLab(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "lab <command>",
		Short:   "Administer a lab's student accounts (root)",
		Example: `  stemctl lab doctor alice`,
	}
	cmd.AddCommand(doctor.NewCmdLabDoctor(f, nil))
	return cmd
}
