// Package down implements `stemctl down`.
package down

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
)

// Options are down's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Timeout  time.Duration
	JSON     bool
}

// NewCmdDown builds the command.
func NewCmdDown(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "down INSTANCE",
		Short: "Stop an instance's container (its record and the card stay; `up` starts it again)",
		Example: `  stemctl down native-amd64-demo-hello-t1
  stemctl down native-amd64-demo-hello-t1 --timeout 2s`,
		Args:              cmdutil.ExactArgs(1, "INSTANCE"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Instance = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Second, "how long to wait before killing the container")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run stops the instance.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	rec, err := m.Down(ctx, opts.Instance, opts.Timeout)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, map[string]any{"instance": rec.Instance, "container_id": rec.ContainerID, "state": "stopped"})
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "%s: stopped (start it again with `%s`)\n", rec.Instance, instance.UpCommand(rec))
	return nil
}
