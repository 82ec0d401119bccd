// Package stop implements `stemctl agent stop`.
package stop

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
)

// Options are stop's inputs.
type Options struct {
	F        *cmdutil.Factory
	IDs      []string
	Instance string
	Provider string
	All      bool
	Timeout  time.Duration
	JSON     bool
}

// NewCmdStop builds the command; runF replaces the run function in tests.
func NewCmdStop(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "stop [ID...] [--instance NAME] [--provider P] [--all]",
		Short: "Stop agents and close their windows; the student's session stays",
		Long: `Stop agents by id (see stemctl agent list), or every agent of an instance
(--instance, optionally only one --provider), or all of them (--all). The agent gets
a hangup as from a closed terminal, then SIGTERM, then SIGKILL after --timeout; its
window in the student's tmux is closed. Nothing else in the session changes: nvim,
the debugger, other windows and the container keep running. An agent that had
already ended (its window closed, its container stopped, removed or re-created) is
reported as such and its record removed; a window is closed only in the container
the agent was started in.`,
		Example: `  stemctl agent stop 3fa2c1
  stemctl agent stop --instance hazard3-sim-inf-bss-t4 --provider codex
  stemctl agent stop --all`,
		ValidArgsFunction: agentutil.CompleteAgent(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IDs = args
			if len(args) == 0 && opts.Instance == "" && opts.Provider == "" && !opts.All {
				return cmdutil.FlagErrorf("name the agents to stop: IDs (stemctl agent list), --instance NAME, --provider P, or --all")
			}
			if opts.All && (len(args) > 0 || opts.Instance != "" || opts.Provider != "") {
				return cmdutil.FlagErrorf("--all stops every agent: give it alone")
			}
			for _, id := range args {
				if !agentstore.ValidID(id) {
					return cmdutil.FlagErrorf("%q is not an agent id (six hex digits, see stemctl agent list)", id)
				}
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().StringVar(&opts.Instance, "instance", "", "stop the agents of this instance (name or container id)")
	cmd.Flags().StringVar(&opts.Provider, "provider", "", "stop only agents of this provider")
	cmd.Flags().BoolVar(&opts.All, "all", false, "stop every agent")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 6*time.Second, "how long to wait before killing")
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmd.RegisterFlagCompletionFunc("provider", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return agentutil.CompleteProvider(f)(toComplete)
	})
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Stopped reports one stopped agent.
type Stopped struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Instance string `json:"instance"`
	// AlreadyEnded: the agent had ended before (its window closed, its
	// container stopped, removed or re-created); only its record went.
	AlreadyEnded bool `json:"already_ended,omitempty"`
	// Reason is why it had ended or was ending, when its supervisor said.
	Reason   string   `json:"reason,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Run stops the agents.
func Run(ctx context.Context, opts *Options) error {
	env, err := agentutil.NewEnv(opts.F)
	if err != nil {
		return err
	}
	reg, err := opts.F.Registry()
	if err != nil {
		return err
	}
	inst, err := agentutil.InstanceName(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	sts, err := env.Store.List(false)
	if err != nil {
		return err
	}
	var pick []agentstore.Record
	for _, id := range opts.IDs {
		rec, err := env.Store.Read(id)
		if err != nil {
			return err
		}
		pick = append(pick, rec)
	}
	if len(opts.IDs) == 0 {
		for _, s := range sts {
			if s.Instance == "" {
				continue // a damaged record: stemctl agent list says what to do
			}
			if (opts.All || inst == "" || s.Instance == inst) && (opts.Provider == "" || s.Provider == opts.Provider) {
				pick = append(pick, s.Record)
			}
		}
		if len(pick) == 0 {
			return fmt.Errorf("no running agent matches (stemctl agent list shows them)")
		}
	}
	done := []Stopped{}
	var failed []string
	for _, r := range pick {
		if slices.ContainsFunc(done, func(s Stopped) bool { return s.ID == r.ID }) {
			continue
		}
		res, err := env.Stop(ctx, r, reg, instance.DialTmux, opts.Timeout)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.ID, err))
			continue
		}
		done = append(done, Stopped{ID: r.ID, Provider: r.Provider, Instance: r.Instance,
			AlreadyEnded: res.AlreadyEnded, Reason: res.Reason, Warnings: res.Warnings})
	}
	if opts.JSON {
		if err := cmdutil.WriteJSON(opts.F.IOStreams.Out, done); err != nil {
			return err
		}
	} else {
		for _, s := range done {
			switch {
			case s.AlreadyEnded && s.Reason != "":
				fmt.Fprintf(opts.F.IOStreams.Out, "agent %s (%s on %s) had already ended: %s; its record is removed\n", s.ID, s.Provider, s.Instance, s.Reason)
			case s.AlreadyEnded:
				fmt.Fprintf(opts.F.IOStreams.Out, "agent %s (%s on %s) had already ended; its record is removed\n", s.ID, s.Provider, s.Instance)
			case s.Reason != "":
				fmt.Fprintf(opts.F.IOStreams.Out, "stopped agent %s (%s on %s), which was ending: %s\n", s.ID, s.Provider, s.Instance, s.Reason)
			default:
				fmt.Fprintf(opts.F.IOStreams.Out, "stopped agent %s (%s on %s)\n", s.ID, s.Provider, s.Instance)
			}
			for _, w := range s.Warnings {
				fmt.Fprintf(opts.F.IOStreams.ErrOut, "  warning: %s\n", w)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not stop: %v", failed)
	}
	return nil
}
