// Package up implements `stemctl up`.
package up

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/termtext"
)

// Options are up's inputs.
type Options struct {
	F       *cmdutil.Factory
	Args    []string
	Target  string
	Devices []string
	Select  bool
	Force   bool
	JSON    bool
}

// NewCmdUp builds the command; runF replaces the run function in tests.
func NewCmdUp(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "up " + cmdutil.TaskArgs,
		Short: "Start (or reuse) the container for a task, with tmux and nvim inside",
		Long: `Resolve the task in the workspace ($STEM_WORKSPACE, default ~/dev/workspace/stem),
start its container with the card repository and the socket directory mounted at
the same paths, and wait until tmux and nvim answer; nvim then opens the task's
files (the manifest's open list, or its editable files) without replacing what
is open or unsaved. A healthy instance is reused;
one whose configuration or schema changed, or whose tmux server is gone, is
re-created (new container id, new socket directory, the old one removed). If only
nvim is gone (the student quit it), nvim is started again in the edit window and
the session is kept. Devices given once with --device stay with the instance.

Re-creating a running instance ends the student's session; up refuses while its
nvim has unsaved changes (save them, or pass --force to discard them). build,
test, run, deploy, debug and agent start never re-create a running instance:
they ask you to run up.

Creating an instance never changes which instance MCP providers are talking to
unless you pass --select; re-creating the selected instance moves the selection to
its new container. Several stemctl processes bringing up the same instance take
turns.`,
		Example: `  stemctl up native-amd64 demo hello 1
  stemctl up hazard3-sim inf bss 4 --select
  stemctl up rp2350 demo hello 3 --target rp2350-arm --device /dev/ttyACM0`,
		Args:              cmdutil.ExactArgs(4, cmdutil.TaskArgs),
		ValidArgsFunction: cmdutil.CompleteTask(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmdutil.AddTaskFlags(cmd, &opts.Target, &opts.Devices, 0)
	cmd.Flags().BoolVar(&opts.Select, "select", false, "also make this the instance MCP providers talk to")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "re-create the instance even if its editor has unsaved changes (they are lost)")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run brings the instance up.
func Run(ctx context.Context, opts *Options) error {
	r, err := cmdutil.ResolveTask(opts.F, opts.Args, opts.Target)
	if err != nil {
		return err
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	res, err := m.Up(ctx, r, instance.UpOptions{Devices: opts.Devices, Force: opts.Force})
	if err != nil {
		return err
	}
	if _, err := instance.OpenTaskFiles(res.Record, r); err != nil {
		fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: warning: %v\n", err)
	}
	if opts.Select {
		if err := selection.Select(m.Layout, res.Record.Dir()); err != nil {
			return err
		}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, res)
	}
	return printHuman(opts, res)
}

func printHuman(opts *Options, res instance.UpResult) error {
	out := opts.F.IOStreams.Out
	rec := res.Record
	fmt.Fprintf(out, "%s: %s in %s", rec.Instance, res.Action, res.Duration.Round(time.Millisecond))
	if res.Reason != "" {
		fmt.Fprintf(out, " (%s)", termtext.Line(res.Reason, 1000)) // may quote a server's error
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "  container  %.12s (%s)\n", rec.ContainerID, rec.Image)
	fmt.Fprintf(out, "  task       %s/%s task %s on %s, target %s\n", rec.Series, rec.Card, rec.Task, rec.Profile, rec.Target)
	fmt.Fprintf(out, "  card       %s\n", rec.CardPath)
	fmt.Fprintf(out, "  sockets    %s\n", rec.SocketDir)
	fmt.Fprintf(out, "  attach     stemctl attach %s\n", rec.Instance)
	if opts.Select {
		fmt.Fprintf(out, "  MCP        selected: providers now talk to this instance\n")
	} else {
		fmt.Fprintf(out, "  MCP        stemctl mcp select %s\n", rec.Instance)
	}
	return nil
}
