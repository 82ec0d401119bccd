// Package rm implements `stemctl rm`.
package rm

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are rm's inputs.
type Options struct {
	F         *cmdutil.Factory
	Instances []string
	JSON      bool
}

// NewCmdRm builds the command.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "rm INSTANCE...",
		Short: "Remove instances: container, socket directories and registry record",
		Long: `Remove each instance's container, its socket directories and its registry
record, and clear the MCP selection if it pointed there. The card repository and
the student's work in it are never touched.`,
		Example:           `  stemctl rm native-amd64-demo-hello-t1`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Instances = args
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run removes the instances; it goes on after a failure and reports all.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	type result struct {
		Instance string `json:"instance"`
		Removed  bool   `json:"removed"`
		Error    string `json:"error,omitempty"`
	}
	var results []result
	failed := 0
	for _, ref := range opts.Instances {
		rec, err := m.Remove(ctx, ref)
		name := rec.Instance
		if name == "" {
			name = ref
		}
		if err != nil {
			failed++
			results = append(results, result{Instance: name, Error: err.Error()})
			if !opts.JSON {
				fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: %s: %v\n", name, err)
			}
			continue
		}
		results = append(results, result{Instance: name, Removed: true})
		if !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.Out, "%s: removed\n", name)
		}
	}
	if opts.JSON {
		if err := cmdutil.WriteJSON(opts.F.IOStreams.Out, results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}
