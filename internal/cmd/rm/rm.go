// Package rm implements `stemctl rm`.
package rm

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
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
record, and clear the MCP selection if it pointed there. Agents on the instance
(stemctl agent list) are stopped first, those started with --here too. The card
repository and the student's work in it are never touched.`,
		Example:           `  stemctl rm native-amd64-demo-hello-t1`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Instances = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// stopAgents stops the agents on the instance ref names before it goes, so
// none is left running against a removed container (a --here agent has no
// window whose closing would end it). Failures are warnings: the removal
// itself must not depend on them.
func stopAgents(ctx context.Context, opts *Options, ref string) {
	env, err := agentutil.NewEnv(opts.F)
	if err != nil {
		return
	}
	reg, err := opts.F.Registry()
	if err != nil {
		return
	}
	rec, err := reg.Find(ctx, ref)
	if err != nil {
		return
	}
	sts, err := env.Store.List(false)
	if err != nil {
		return
	}
	for _, s := range sts {
		if s.Instance != rec.Instance {
			continue
		}
		if !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "%s: stopping agent %s (%s)\n", rec.Instance, s.ID, s.Provider)
		}
		if _, err := env.Stop(ctx, s.Record, reg, instance.DialTmux, 5*time.Second); err != nil {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: %s: stopping agent %s: %v\n", rec.Instance, s.ID, err)
		} else if !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "%s: stopped agent %s (%s)\n", rec.Instance, s.ID, s.Provider)
		}
	}
}

// known reports whether the registry names ref, so that the progress line
// is not printed before the one-line error of a name that is not there.
func known(ctx context.Context, opts *Options, ref string) bool {
	reg, err := opts.F.Registry()
	if err != nil {
		return false
	}
	_, err = reg.Find(ctx, ref)
	return err == nil
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
	// Ctrl-C stops rm at the next safe point: a step begun (stopping an
	// agent, removing an instance) runs to its end, since cutting it off
	// would leave an agent record without its process or a record naming
	// a container Podman removed anyway; the next step does not begin.
	work := context.WithoutCancel(ctx)
	for _, ref := range opts.Instances {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := context.WithTimeout(work, time.Minute)
		stopAgents(sctx, opts, ref)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if !opts.JSON && known(work, opts, ref) {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "%s: removing\n", ref)
		}
		rctx, cancel := context.WithTimeout(work, 2*time.Minute)
		rec, err := m.Remove(rctx, ref)
		cancel()
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
	if ctx.Err() != nil {
		// The interruption first: stemctl says so and exits 130.
		return ctx.Err()
	}
	if failed > 0 {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}
