// Package list implements `stemctl agent list`.
package list

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are list's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	JSON     bool
	Now      func() time.Time
}

// NewCmdList builds the command; runF replaces the run function in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "list [--instance NAME]",
		Short: "List running agents: instance, provider, level, where, since when",
		Long: `List the agents started with ` + "`stemctl agent start`" + ` or ` + "`attach`" + ` that are still running,
per instance: the provider, the access level of its stem-mcp, where its terminal is
(a window of the student's tmux, or the terminal that ran --here), and since when.
An agent that is ending (its window was closed, its container stopped, removed or
re-created) says so instead of where it is; agents whose process has ended are
cleaned up on the way. An agent whose CLI waits for its user (a first-run dialog,
a login or API key screen, an update offer, a permission prompt, as read from its
window) says "WAITS FOR YOU" and what it asks
("waiting" in --json).`,
		Example: `  stemctl agent list
  stemctl agent list --instance hazard3-sim-inf-bss-t4 --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmd.Flags().StringVar(&opts.Instance, "instance", "", "only the agents of this instance (name or container id)")
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run lists the agents.
func Run(ctx context.Context, opts *Options) error {
	env, err := agentutil.NewEnv(opts.F)
	if err != nil {
		return err
	}
	inst, err := agentutil.InstanceName(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	all, err := env.Store.List(true)
	if err != nil {
		return err
	}
	sts := []agentstore.Status{}
	for _, s := range all {
		if inst == "" || s.Instance == inst {
			sts = append(sts, s)
		}
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		return cmdutil.WriteJSON(out, sts)
	}
	if len(sts) == 0 {
		fmt.Fprintln(opts.F.IOStreams.ErrOut, "no agents are running (start one: stemctl agent start PROVIDER "+cmdutil.TaskArgs+")")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tINSTANCE\tPROVIDER\tLEVEL\tWHERE\tSINCE")
	for _, s := range sts {
		where := fmt.Sprintf("here (pid %d)", s.PID)
		if s.Mode == agentstore.ModeWindow {
			where = fmt.Sprintf("tmux window %s (%s)", s.Window, s.Pane)
		}
		if s.Problem != "" {
			where = s.Problem
		} else if s.Waiting != "" {
			where += ", WAITS FOR YOU: " + s.Waiting
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Instance, s.Provider, s.Level, where, agentutil.Since(s.Started, opts.Now()))
	}
	return tw.Flush()
}
