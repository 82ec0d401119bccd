// Package attach implements `stemctl agent attach`: an agent for an
// instance that is already running.
package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/registry"
)

// Options are attach's inputs.
type Options struct {
	F          *cmdutil.Factory
	Provider   string
	Instance   string
	Extra      []string
	Level      string
	Here       bool
	Background bool
	JSON       bool
}

// NewCmdAttach builds the command; runF replaces the run function in tests.
func NewCmdAttach(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "attach PROVIDER [--instance NAME] [-- PROVIDER_ARGS...]",
		Short: "Start an AI agent in a running instance's session",
		Long: `Like ` + "`stemctl agent start`" + `, for an instance that is already running: nothing is
started or re-created; the instance is verified (registry, container id, label, tmux
and nvim answering) and the agent joins its session. Without --instance, in a task's
directory of the card, the instance of that task.`,
		Example: `  stemctl agent attach codex --instance hazard3-sim-inf-bss-t4
  stemctl agent attach claude --instance native-amd64-demo-hello-t1 --level observe --here`,
		Args: func(cmd *cobra.Command, args []string) error {
			n := len(args)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				n = d
			}
			if n != 1 {
				return cmdutil.FlagErrorf("agent attach takes PROVIDER --instance NAME (got %d argument(s)); provider arguments go after --", n)
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return agentutil.CompleteProvider(f)(toComplete)
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				opts.Extra = args[d:]
				args = args[:d]
			}
			opts.Provider = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().StringVar(&opts.Instance, "instance", "", "the running instance (name or container id)")
	agentutil.AddLaunchFlags(cmd, &opts.Level, &opts.Here, &opts.Background)
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run starts the agent on the running instance.
func Run(ctx context.Context, opts *Options) error {
	level, err := agentutil.CheckLaunch(opts.F, opts.Provider, opts.Level, opts.Here, func() (err error) {
		opts.Instance, err = cmdutil.InstanceOr(ctx, opts.F, opts.Instance)
		return err
	})
	if err != nil {
		return err
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	rec, err := m.Running(ctx, opts.Instance)
	if err != nil {
		// attach never starts anything; agent start does both.
		if errors.Is(err, registry.ErrNotFound) {
			return fmt.Errorf("agent attach: %w; to start a task's instance together with the agent run `stemctl agent start %s %s`", err, opts.Provider, cmdutil.TaskArgs)
		}
		// Stopped, or its container removed: the error names `stemctl up`.
		if rec.Instance != "" && strings.Contains(err.Error(), instance.UpCommand(rec)) {
			start := strings.Replace(instance.UpCommand(rec), "stemctl up ", "stemctl agent start "+opts.Provider+" ", 1)
			return fmt.Errorf("agent attach: %w, or `%s` to start it together with the agent", err, start)
		}
		return err
	}
	r, err := cmdutil.ResolveRecord(rec)
	if err != nil {
		return err
	}
	return agentutil.Launch(ctx, opts.F, agentutil.LaunchOptions{
		Provider: opts.Provider, Level: level, Instance: rec.Instance, Resolved: r,
		Here: opts.Here, Background: opts.Background, Extra: opts.Extra, JSON: opts.JSON,
	})
}
