// Package down implements `stemctl down`.
package down

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/instance"
)

// Options are down's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Timeout  time.Duration
	Force    bool
	JSON     bool
}

// NewCmdDown builds the command.
func NewCmdDown(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "down [INSTANCE]",
		Short: "Stop an instance's container (its record and the card stay; `up` starts it again)",
		Long: `Stop an instance's container. Its record and the card stay, and ` + "`stemctl up`" + `
starts it again; the shells, running programs and the editor's unsaved changes
end with it, so down refuses while the editor has unsaved buffers and names
them: save them (:wa in Neovim), or pass --force to discard them.
Without INSTANCE, in a task's directory of the card, the instance of that task.`,
		Example: `  stemctl down native-amd64-demo-hello-t1
  stemctl down native-amd64-demo-hello-t1 --timeout 2s
  stemctl down native-amd64-demo-hello-t1 --force`,
		Args:              cmdutil.OptionalInstance("INSTANCE"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE:              cmdutil.RunEOptional(&opts.Instance, opts, runF, Run),
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Second, "how long to wait before killing the container")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "stop even if the editor has unsaved changes (they are lost)")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run stops the instance.
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
	rec, err := m.Registry.Find(ctx, opts.Instance)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if opts.Force {
		m.DiscardEdits(uctx, rec)
	} else {
		unsaved, err := m.Unsaved(uctx, rec)
		switch {
		case err != nil:
			cancel()
			return fmt.Errorf("%s: the editor does not say whether it has unsaved changes (%v); nothing was stopped: answer its prompt in the edit window and save (:wa), or run `stemctl down %s --force` to discard what it has", rec.Instance, err, rec.Instance)
		case len(unsaved) > 0:
			cancel()
			return fmt.Errorf("%s: the editor has unsaved changes in %s; nothing was stopped: save them (:wa in Neovim), or run `stemctl down %s --force` to discard them", rec.Instance, strings.Join(unsaved, ", "), rec.Instance)
		}
	}
	cancel()
	rec, err = m.Down(ctx, rec.Instance, opts.Timeout)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, map[string]any{"instance": rec.Instance, "container_id": rec.ContainerID, "state": "stopped"})
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "%s: stopped (start it again with `%s`)\n", rec.Instance, instance.UpCommand(rec))
	return nil
}
