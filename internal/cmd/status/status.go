// Package status implements `stemctl status`.
package status

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
)

// Options are status's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	JSON     bool
}

// NewCmdStatus builds the command.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "status [INSTANCE]",
		Short: "Show an instance's container, sockets and health",
		Long: `Show whether the instance's container exists and runs, whether tmux and nvim
answer on its sockets, and whether it is the MCP selection; also the card's copy
of the instance's record (.stem/instances/INSTANCE/, or the older .rv/ layout)
and any socket directory a previous container left. The exit status is 0 when
the instance is running and healthy, 3 otherwise. Without INSTANCE, in a task's
directory of the card, the instance of that task.`,
		Example: `  stemctl status native-amd64-demo-hello-t1
  stemctl status 3f2a9c1b7d4e --json
  stemctl status`,
		Args:              cmdutil.OptionalInstance("INSTANCE (name or container id)"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE:              cmdutil.RunEOptional(&opts.Instance, opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run prints the status.
func Run(ctx context.Context, opts *Options) error {
	inst, err := cmdutil.InstanceOr(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	opts.Instance = inst
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	st, err := m.Status(ctx, opts.Instance)
	if err != nil {
		return err
	}
	if opts.JSON {
		if err := cmdutil.WriteJSON(opts.F.IOStreams.Out, st); err != nil {
			return err
		}
	} else {
		Print(opts.F.IOStreams.Out, st)
	}
	if st.State != instance.StateRunning {
		return &cmdutil.ExitError{Code: 3}
	}
	return nil
}

// Print writes a human-readable status.
func Print(w io.Writer, st instance.Status) {
	r := st.Record
	yes := func(b bool) string {
		if b {
			return "answers"
		}
		return "does not answer"
	}
	fmt.Fprintf(w, "instance   %s\n", r.Instance)
	fmt.Fprintf(w, "state      %s\n", st.State)
	fmt.Fprintf(w, "container  %s\n", r.ContainerID)
	fmt.Fprintf(w, "profile    %s (target %s)\n", r.Profile, r.Target)
	fmt.Fprintf(w, "task       %s/%s task %s\n", r.Series, r.Card, r.Task)
	fmt.Fprintf(w, "card       %s\n", r.CardPath)
	fmt.Fprintf(w, "sockets    %s\n", r.SocketDir)
	if st.State == instance.StateRunning || st.State == instance.StateUnhealthy {
		fmt.Fprintf(w, "tmux       %s\n", yes(st.Tmux))
		fmt.Fprintf(w, "nvim       %s\n", yes(st.Nvim))
	}
	sel := "no"
	if st.Selected {
		sel = "yes (MCP providers talk to this instance)"
	}
	fmt.Fprintf(w, "selected   %s\n", sel)
	if cs := st.CardState; cs != nil {
		fmt.Fprintf(w, "card state %s\n", cardStateLine(*cs))
	}
	for _, p := range st.Stale {
		fmt.Fprintf(w, "stale      %s (a previous container's socket directory; `%s` removes it)\n", p, instance.UpCommand(r))
	}
	for _, p := range st.Problems {
		fmt.Fprintf(w, "problem    %s\n", p)
	}
	if st.GitNote != "" {
		fmt.Fprintf(w, "git        %s\n", st.GitNote)
	}
	if st.Hint != "" {
		fmt.Fprintf(w, "fix        %s\n", st.Hint)
	}
}

// cardStateLine says where the card's copy of the record is and whether it
// names the current container. The card is container-writable: only the
// directory it was read from and a well-formed container id are shown.
func cardStateLine(cs instance.CardState) string {
	if cs.Error != "" {
		return "none (" + cs.Error + "); the next `stemctl up` writes it"
	}
	s := cs.Dir
	if cs.Legacy {
		s += " (older .rv/ layout; the next `stemctl up` writes .stem/)"
	}
	switch {
	case cs.Current:
		return s + fmt.Sprintf(", names the current container %.12s", cs.ContainerID)
	case cs.ContainerID != "":
		return s + fmt.Sprintf(", names container %.12s, not the current one; the next `stemctl up` rewrites it", cs.ContainerID)
	}
	return s + ", names no container"
}
