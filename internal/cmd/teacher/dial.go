package teacher

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/tcprelay"
)

// DialOptions are `teacher dial`'s inputs.
type DialOptions struct {
	F          *cmdutil.Factory
	Host, Port string
}

// NewCmdDial builds `teacher dial`, the ProxyCommand the MCP entries use.
func NewCmdDial(f *cmdutil.Factory, runF func(context.Context, *DialOptions) error) *cobra.Command {
	opts := &DialOptions{F: f}
	cmd := &cobra.Command{
		Use:   "dial HOST PORT",
		Short: "Carry one ssh connection to HOST:PORT (the ProxyCommand of the MCP entries)",
		Long: `ssh runs this as its ProxyCommand; it connects to HOST:PORT and copies bytes
between the connection and stdin/stdout. Its socket sends small packets at once
and acknowledges at once, which saves the SSH handshake about three delayed-ACK
waits (about 40 ms each). The SSH stream stays encrypted end to end; host keys
are checked by ssh as always. "stemctl teacher config --direct" leaves it out.`,
		Example: `  ssh -o "ProxyCommand=/usr/local/bin/stemctl teacher dial '%h' %p" -i ~/.ssh/stem_kowalski anna@lab-03 status`,
		Hidden:  true,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Host, opts.Port = args[0], args[1]
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunDial)
		},
	}
	return cmd
}

// RunDial relays stdin/stdout to the connection. HOST may be an IPv6
// address, bare or in brackets.
func RunDial(ctx context.Context, opts *DialOptions) error {
	ios := opts.F.IOStreams
	return tcprelay.Run(ctx, tcprelay.TrimBrackets(opts.Host), opts.Port, ios.In, ios.Out)
}
