// Package mcplist implements `stemctl mcp list`: the registry records, as a
// provider would see them (no engine calls, so it is instant).
package mcplist

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/selection"
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
		Short:   "Show the registry records MCP providers can select",
		Example: `  stemctl mcp list --json`,
		Args:    cobra.NoArgs,
		RunE:    cmdutil.RunE(opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run prints the records.
func Run(ctx context.Context, opts *Options) error {
	reg, err := opts.F.Registry()
	if err != nil {
		return err
	}
	recs, err := reg.List(ctx)
	if err != nil {
		return err
	}
	l, err := opts.F.Layout()
	if err != nil {
		return err
	}
	cur, _ := selection.Current(l)
	type row struct {
		Instance    string `json:"instance"`
		ContainerID string `json:"container_id"`
		SocketDir   string `json:"socket_dir"`
		Selected    bool   `json:"selected"`
	}
	rows := make([]row, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, row{r.Instance, r.ContainerID, r.SocketDir, cur != "" && filepath.Clean(r.SocketDir) == cur})
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(opts.F.IOStreams.ErrOut, "no instances registered: start one with `stemctl up`")
		return nil
	}
	tw := tabwriter.NewWriter(opts.F.IOStreams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SELECTED\tINSTANCE\tCONTAINER\tSOCKETS")
	for _, r := range rows {
		mark := ""
		if r.Selected {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\n", mark, r.Instance, r.ContainerID, r.SocketDir)
	}
	return tw.Flush()
}
