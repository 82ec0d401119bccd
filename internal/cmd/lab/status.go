package lab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/termtext"
)

// StatusOptions are status's inputs.
type StatusOptions struct {
	F *cmdutil.Factory
	common
	Names []string
	JSON  bool
}

// NewCmdStatus builds `stemctl lab status [NAME...]` (alias list).
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{F: f, common: common{Geteuid: os.Geteuid}}
	cmd := &cobra.Command{
		Use:     "status [NAME...]",
		Aliases: []string{"list"},
		Short:   "Say which lab accounts are ready, and what the others lack (root)",
		Long: `status checks every account of the lab's roster (or the named ones) and
prints one line each: ready, or the failing requirements (stemctl lab doctor
NAME shows each with its fix). The exit status is 1 when an account is not
ready.

Root checks the subordinate ids, the runtime directory and the shared image
store itself; the other requirements are what stemctl doctor, run as the
account, reports. The student owns their account and could make that report
say anything, so a failing requirement it reports is marked "(reported)",
and --json gives each check's "by": root or account.`,
		Example: `  stemctl lab status
  stemctl lab list anna ben
  stemctl lab status --json | jq -r '.[] | select(.ready | not) | .name'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunStatus)
		},
	}
	opts.common.flags(cmd)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunStatus reports each account.
func RunStatus(ctx context.Context, opts *StatusOptions) error {
	if err := opts.needRoot("status"); err != nil {
		return err
	}
	o, err := opts.options(opts.F)
	if err != nil {
		return err
	}
	list, err := lab.Check(ctx, o, opts.Names)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	ready := true
	for _, s := range list {
		ready = ready && s.Ready
	}
	if opts.JSON {
		if list == nil {
			list = []lab.Status{}
		}
		if err := cmdutil.WriteJSON(out, list); err != nil {
			return err
		}
	} else {
		if len(list) == 0 {
			fmt.Fprintf(out, "no accounts in %s (add them with `stemctl lab add NAME`)\n", lab.RosterPath(o.Dir))
			return nil
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tHOST\tSTATUS")
		for _, s := range list {
			state := "ready"
			if !s.Ready {
				state = "missing: " + strings.Join(marked(s), ", ")
			}
			if len(s.Warnings) > 0 {
				state += " (warnings: " + strings.Join(s.Warnings, ", ") + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Host, termtext.OneLine(state, 0))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nroot checked %s itself; the rest is each account's own stemctl doctor's report\n",
			strings.Join(rootChecked(list...), ", "))
	}
	if !ready {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

// marked are s's missing requirements, those its own doctor reported
// marked so.
func marked(s lab.Status) []string {
	by := map[string]string{}
	for _, c := range s.Checks {
		by[c.Name] = c.By
	}
	var out []string
	for _, m := range s.Missing {
		if by[m] == lab.ByAccount {
			m += " (reported)"
		}
		out = append(out, m)
	}
	return out
}
