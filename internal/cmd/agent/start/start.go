// Package start implements `stemctl agent start`.
package start

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/workspace"
)

// Options are start's inputs.
type Options struct {
	F          *cmdutil.Factory
	Provider   string
	Args       []string // PROFILE SERIES CARD TASK
	Extra      []string // after --: the provider's own arguments
	Target     string
	Devices    []string
	Level      string
	Here       bool
	Background bool
	JSON       bool
}

// NewCmdStart builds the command; runF replaces the run function in tests.
func NewCmdStart(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "start PROVIDER [" + cmdutil.TaskArgs + "] [-- PROVIDER_ARGS...]",
		Short: "Start an AI agent in the student's session of a task",
		Long: `Resolve the task exactly as ` + "`stemctl debug`" + ` does, start (or reuse) its instance, and
start the agent CLI PROVIDER (codex, claude, gemini, or one from agents.toml) in a
sandbox of its own beside the student's container:

  - the sandbox (image localhost/stem-agent, make agent-image) has no network but the
    provider's API endpoint, through a proxy on the host (egress in agents.toml), sees
    the card at its own path (read-only below --level full) and none of stem's sockets;
  - its MCP server is the host's stem-mcp, fixed to this instance and to --level
    (default assist), reached through a socket of the sandbox; starting an agent never
    changes another session's selection;
  - it gets the task's context (card repository, profile and limits, task, its
    build/test/run/debug commands, socket paths) as a file its CLI reads and as the
    resource stem://context; of your environment only the provider's key and endpoint
    variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...);
  - its environment has STEM_AGENT, STEM_MCP=1, STEM_INSTANCE, STEM_AGENT_ID,
    STEM_AGENT_LEVEL, STEM_AGENT_CONTEXT and STEM_MCP_CONFIG;
  - its terminal opens in a new window of the student's tmux (named after the
    provider), so the student sees it and can type to it; closing that window ends
    the agent.

With --here the CLI runs on the host in this terminal instead, as you, in an empty
directory (no settings or instructions are read from the card), with its own tools
under its own approval settings.
Without PROFILE SERIES CARD TASK, in a task's directory of the card, the agent
joins the instance of that task. Arguments after -- go to the provider's CLI.`,
		Example: `  stemctl agent start codex hazard3-sim inf bss 4
  stemctl agent start claude native-amd64 demo hello 1 --level observe
  stemctl agent start gemini rp2350 demo hello 3 --target rp2350-rv
  stemctl agent start codex hazard3-sim inf bss 4 --here -- --model o4-mini
  stemctl agent start claude`,
		Args: func(cmd *cobra.Command, args []string) error {
			n := len(args)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				n = d
			}
			if n != 5 && n != 1 {
				return cmdutil.FlagErrorf("agent start takes PROVIDER %s, or PROVIDER alone in a task's directory (got %d argument(s)); provider arguments go after --", cmdutil.TaskArgs, n)
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return agentutil.CompleteProvider(f)(toComplete)
			}
			return cmdutil.CompleteTask(f)(cmd, args[1:], toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				opts.Extra = args[d:]
				args = args[:d]
			}
			opts.Provider, opts.Args = args[0], args[1:]
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmdutil.AddTaskFlags(cmd, &opts.Target, &opts.Devices, 1)
	agentutil.AddLaunchFlags(cmd, &opts.Level, &opts.Here, &opts.Background)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run starts the agent.
func Run(ctx context.Context, opts *Options) error {
	var r *workspace.Resolved
	level, err := agentutil.CheckLaunch(opts.F, opts.Provider, opts.Level, opts.Here, func() (err error) {
		r, err = resolve(ctx, opts)
		return err
	})
	if err != nil {
		return err
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	res, err := m.Up(ctx, r, instance.UpOptions{Devices: opts.Devices, KeepRunning: true}) // only `stemctl up` ends a live session
	if err != nil {
		return err
	}
	return agentutil.Launch(ctx, opts.F, agentutil.LaunchOptions{
		Provider: opts.Provider, Level: level, Instance: res.Record.Instance, Resolved: r,
		Here: opts.Here, Background: opts.Background, Extra: opts.Extra, JSON: opts.JSON,
	})
}

// resolve is the task of PROFILE SERIES CARD TASK, or without them the
// task of the instance whose task directory this runs in.
func resolve(ctx context.Context, opts *Options) (*workspace.Resolved, error) {
	if len(opts.Args) == 4 {
		return cmdutil.ResolveTask(opts.F, opts.Args, opts.Target)
	}
	rec, err := cmdutil.FindInstance(ctx, opts.F, "")
	if err != nil {
		return nil, err
	}
	return cmdutil.ResolveRecord(rec)
}
