// Package mcpstatus implements `stemctl mcp status`.
package mcpstatus

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/verify"
)

// Options are status's inputs.
type Options struct {
	F    *cmdutil.Factory
	JSON bool
}

// NewCmdStatus builds the command.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Confirm the current selection and that both servers answer",
		Long: `Re-verify the selected instance exactly as stem-mcp does before serving: the
registry record, the full container id, the instance label, and that tmux and nvim
answer. Exit status 0 when all hold, 3 otherwise.`,
		Example: `  stemctl mcp status
  stemctl mcp status --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Result is status's JSON output.
type Result struct {
	Selected    bool   `json:"selected"`
	Link        string `json:"link"`
	Target      string `json:"target,omitempty"`
	Instance    string `json:"instance,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	OK          bool   `json:"ok"`
	Check       string `json:"failed_check,omitempty"`
	Error       string `json:"error,omitempty"`
	// Editor is why Neovim does not answer; the selection still works
	// (tools that do not use the editor are unaffected).
	Editor string `json:"editor_error,omitempty"`
}

// Run verifies the selection.
func Run(ctx context.Context, opts *Options) error {
	c, err := opts.F.Checker(ctx)
	if err != nil {
		return err
	}
	res := Result{Link: c.Layout.Selected()}
	cur, cerr := selection.Current(c.Layout)
	if cerr == nil {
		res.Selected, res.Target = true, cur
		t, err := c.Selected(ctx)
		if err == nil {
			res.OK, res.Instance, res.ContainerID = true, t.Record.Instance, t.Record.ContainerID
			if t.Editor != nil {
				res.Editor = termtext.Line(t.Editor.Error(), 1000)
			}
		} else {
			res.Error = termtext.Line(err.Error(), 1000) // may quote a server's error
			var ve *verify.Error
			if errors.As(err, &ve) {
				res.Check, res.Instance = ve.Check, ve.Instance
			}
		}
	} else {
		res.Error = cerr.Error()
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if err := cmdutil.WriteJSON(out, res); err != nil {
			return err
		}
	} else {
		switch {
		case !res.Selected:
			fmt.Fprintf(out, "nothing selected: %s\n", termtext.Line(cerr.Error(), 1000))
		case res.OK && res.Editor != "":
			fmt.Fprintf(out, "selected   %s\ncontainer  %s\nsockets    %s\nhealth     tmux answers; nvim does not (%s): `stemctl status %s` says how to repair it\n", res.Instance, res.ContainerID, res.Target, res.Editor, res.Instance)
		case res.OK:
			fmt.Fprintf(out, "selected   %s\ncontainer  %s\nsockets    %s\nhealth     tmux and nvim answer\n", res.Instance, res.ContainerID, res.Target)
		default:
			fmt.Fprintf(out, "selected   %s\nproblem    %s\n", res.Target, res.Error)
		}
	}
	if !res.OK {
		return &cmdutil.ExitError{Code: 3}
	}
	return nil
}
