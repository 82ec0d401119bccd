// Package list implements `stemctl list`.
package list

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are list's inputs.
type Options struct {
	F    *cmdutil.Factory
	JSON bool
}

// NewCmdList builds the command.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List instances with their state",
		Example: `  stemctl list
  stemctl list --json | jq -r '.[] | select(.state=="running") | .record.instance'`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run lists instances.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	sts, err := m.List(ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, sts)
	}
	if len(sts) == 0 {
		fmt.Fprintln(opts.F.IOStreams.ErrOut, "no instances: start one with `stemctl up PROFILE SERIES CARD TASK`")
		return nil
	}
	tw := tabwriter.NewWriter(opts.F.IOStreams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tSTATE\tCONTAINER\tTASK\tSELECTED")
	for _, s := range sts {
		sel := ""
		if s.Selected {
			sel = "*"
		}
		r := s.Record
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s/%s t%s\t%s\n", r.Instance, s.State, r.ContainerID, r.Series, r.Card, r.Task, sel)
	}
	return tw.Flush()
}
