// Package mcpselect implements `stemctl mcp select`.
package mcpselect

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/termtext"
)

// Options are select's inputs.
type Options struct {
	F    *cmdutil.Factory
	Ref  string
	JSON bool
}

// NewCmdSelect builds the command.
func NewCmdSelect(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "select [INSTANCE_OR_CONTAINER_ID]",
		Short: "Verify an instance and make it the one MCP providers talk to",
		Long: `Verify the registry record, the full container id, the instance label and that
both tmux and nvim answer, then switch the selection symlink atomically. Nothing
changes when a check fails. Without INSTANCE, in a task's directory of the card,
the instance of that task.`,
		Example: `  stemctl mcp select hazard3-sim-inf-bss-t4
  stemctl mcp select 3f2a9c1b7d4e`,
		Args:              cmdutil.OptionalInstance("INSTANCE_OR_CONTAINER_ID"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE:              cmdutil.RunEOptional(&opts.Ref, opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run verifies and selects.
func Run(ctx context.Context, opts *Options) error {
	ref, err := cmdutil.InstanceOr(ctx, opts.F, opts.Ref)
	if err != nil {
		return err
	}
	opts.Ref = ref
	c, err := opts.F.Checker(ctx)
	if err != nil {
		return err
	}
	t, err := c.Instance(ctx, opts.Ref)
	if err != nil {
		return fmt.Errorf("not selected: %w", err)
	}
	if err := selection.Select(c.Layout, t.Dir); err != nil {
		return err
	}
	if log, err := opts.F.Audit(); err == nil {
		log.Append(ctx, audit.Entry{Event: audit.Select, Account: cmdutil.LocalAccount(), Instance: t.Record.Instance, ContainerID: t.Record.ContainerID, Result: "ok"})
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, map[string]any{
			"instance": t.Record.Instance, "container_id": t.Record.ContainerID,
			"socket_dir": t.Dir.Path, "selected": c.Layout.Selected(),
		})
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "selected %s (container %.12s)\n  %s -> %s\n", t.Record.Instance, t.Record.ContainerID, c.Layout.Selected(), t.Dir.Path)
	if t.Editor != nil {
		fmt.Fprintf(opts.F.IOStreams.ErrOut, "note: nvim in %s does not answer (%s); the editor's tools fail until it is repaired: `stemctl status %s` says how\n", t.Record.Instance, termtext.Line(t.Editor.Error(), 300), t.Record.Instance)
	}
	return nil
}
