package mcpcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/probe"
)

// newCmdGate is the SSH forced command of a teacher's automation key. The
// level and the instances come from the grant, never from the client.
func newCmdGate(ios *iostreams.IOStreams, getenv func(string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "gate --grant ID [--config-dir DIR]",
		Short: "SSH forced command of a teacher's automation key (written by `stemctl access grant`)",
		Long: `Run by sshd for a key granted with ` + "`stemctl access grant`" + `. It reads
SSH_ORIGINAL_COMMAND and accepts only its own verbs: mcp [INSTANCE], status, list.
Anything else is refused with one line on stderr and recorded in the audit log.
It never runs a shell.`,
		Example: `  # sshd runs this for the key of grant g0123456789abcdef (the command="..."
  # stemctl access grant writes in ~/.ssh/authorized_keys), with the client's
  # request in SSH_ORIGINAL_COMMAND:
  /usr/local/bin/stem-mcp gate --grant g0123456789abcdef`,
		DisableFlagParsing: true, // gate.Main parses its own flags
		RunE: func(cmd *cobra.Command, args []string) error {
			code := gate.Main(cmd.Context(), args, gate.Options{
				Getenv: getenv, In: ios.In, Out: ios.Out, ErrOut: ios.ErrOut,
				Tmux: probe.Tmux, Nvim: probe.Nvim, Activity: probe.TmuxActivity,
				Serve: func(ctx context.Context, r gate.ServeRequest) error {
					tuneGC()
					oneProc(getenv) // the process's: the session's is filtered
					l, err := levels.Parse(r.Level)
					if err != nil {
						return err
					}
					return mcpserver.Serve(ctx, mcpserver.Options{
						Level: l, Instance: r.Instance, AllowedInstances: r.AllowedInstances,
						Identity: mcpserver.Identity{Account: r.Identity.Account, Grant: r.Identity.Grant, KeyFP: r.Identity.KeyFP, Client: r.Identity.Client},
						In:       r.In, Out: r.Out, ErrOut: r.ErrOut, Getenv: r.Getenv,
						GateStatus: func(ctx context.Context) (any, error) { return r.Status(ctx) },
					})
				},
			})
			if code != 0 {
				return &cmdutil.ExitError{Code: code}
			}
			return nil
		},
	}
}
