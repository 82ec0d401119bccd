// Package run implements the hidden `stemctl agent run`: the detached
// supervisor that holds an agent's pseudo terminal and serves it to the
// relay in the student's tmux.
package run

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/supervisor"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are run's inputs.
type Options struct {
	F   *cmdutil.Factory
	Dir string
	// ReadyFD is the descriptor of the readiness pipe (0: none).
	ReadyFD int
}

// NewCmdRun builds the command.
func NewCmdRun(f *cmdutil.Factory) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:    "run --dir AGENT_DIR",
		Short:  "Supervise one agent (started by stemctl agent start)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Dir == "" {
				return cmdutil.FlagErrorf("--dir is required")
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "the agent's directory (holds spec.json)")
	cmd.Flags().IntVar(&opts.ReadyFD, "ready-fd", 0, "write readiness lines to this inherited descriptor")
	return cmd
}

// Run supervises the agent. `stemctl agent start` passes a pipe for the
// readiness lines (--ready-fd 3).
func Run(ctx context.Context, opts *Options) error {
	var ready io.WriteCloser
	if opts.ReadyFD > 2 {
		if f := os.NewFile(uintptr(opts.ReadyFD), "ready"); f != nil {
			ready = f
		}
	}
	return supervisor.Supervise(context.WithoutCancel(ctx), opts.Dir, ready, opts.F.IOStreams.ErrOut, opts.F.Engine)
}
