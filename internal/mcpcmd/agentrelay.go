package mcpcmd

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// newCmdAgentRelay is run inside the container by `stemctl agent start`, in
// a new window of the student's tmux: it shows the agent that runs on the
// host (its pseudo terminal is served on a socket in the instance's socket
// directory) and passes the student's keys and window size back.
func newCmdAgentRelay(ios *iostreams.IOStreams, getenv func(string) string) *cobra.Command {
	var sock string
	var noWait bool
	cmd := &cobra.Command{
		Use:    "agent-relay --sock PATH",
		Short:  "Show an agent's terminal in this tmux pane (used by stemctl agent start)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sock == "" {
				return cmdutil.FlagErrorf("--sock is required")
			}
			// The relay owns the pane's terminal (raw mode, SIGWINCH), so
			// it gets the real files.
			_, err := ptyproto.Relay(cmd.Context(), ptyproto.RelayOptions{
				Socket: sock, In: os.Stdin, Out: os.Stdout, Getenv: getenv, NoWait: noWait,
			})
			return err
		},
	}
	cmd.Flags().StringVar(&sock, "sock", "", "the agent's terminal socket (in the instance's socket directory)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "close at once when the agent ends")
	return cmd
}
