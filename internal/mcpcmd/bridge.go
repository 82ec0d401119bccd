package mcpcmd

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// newCmdGDBBridge is run inside the container by the debug layout: the
// student's gdb runs under it with a second, machine UI served on g.sock.
func newCmdGDBBridge(ios *iostreams.IOStreams) *cobra.Command {
	var dir string
	var quiet bool
	cmd := &cobra.Command{
		Use:    "gdb-bridge --dir SOCKDIR -- GDB [ARG...]",
		Short:  "Run the student's gdb with a machine channel on SOCKDIR/g.sock (used by the debug layout)",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return cmdutil.FlagErrorf("usage: stem-mcp gdb-bridge --dir SOCKDIR -- GDB [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return cmdutil.FlagErrorf("--dir is required")
			}
			// The bridge installs process-wide signal handlers and hands the
			// pane's terminal to gdb, so it gets the real files.
			code, err := gdbmi.RunBridge(cmd.Context(), gdbmi.BridgeOptions{
				Dir: dir, Argv: args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Log: ios.ErrOut, Quiet: quiet,
			})
			if err != nil {
				return err
			}
			if code != 0 {
				return &cmdutil.ExitError{Code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the container's socket directory")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not note agents' steps in the pane")
	return cmd
}
