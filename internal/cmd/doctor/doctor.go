// Package doctor implements `stemctl doctor`: every requirement stem has
// of the account running it, each with pass or fail and the command that
// fixes it (the checks are internal/doctor's).
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/termtext"
)

// Options are doctor's inputs.
type Options struct {
	F    *cmdutil.Factory
	JSON bool
	// Env builds what the checks look at (tests give a fake one).
	Env func(ctx context.Context) (*doctor.Env, error)
}

// Report is the --json output.
type Report struct {
	User   string          `json:"user"`
	UID    int             `json:"uid"`
	OK     bool            `json:"ok"`
	Checks []doctor.Result `json:"checks"`
}

// NewCmdDoctor builds the command.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f, Env: func(ctx context.Context) (*doctor.Env, error) { return NewEnv(f) }}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what stem needs from this account, with the command that fixes each gap",
		Long: `doctor checks every requirement stem has of the account running it: Podman,
its API service and a runtime that starts a container on the account's ids,
subordinate ids, the runtime directory, the storage driver, cgroups, ACLs on
the workspace's and runtime directory's file systems, the images, the
workspace and its cards, the git identity, stem-mcp and sshd.

Each line is ✓ (fine), ! (a warning: something works less well or only some
features need it) or ✗ (failing), with the command that fixes it. The exit
status is 1 when a requirement of stemctl up fails.`,
		Example: `  stemctl doctor
  stemctl doctor --json | jq -r '.checks[] | select(.status != "ok") | .fix'`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run checks the account and reports.
func Run(ctx context.Context, opts *Options) error {
	env, err := opts.Env(ctx)
	if err != nil {
		return err
	}
	rs := doctor.Run(ctx, env)
	failed := doctor.Failed(rs)
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if err := cmdutil.WriteJSON(out, Report{User: env.User, UID: env.UID, OK: !failed, Checks: rs}); err != nil {
			return err
		}
	} else if err := Print(out, env.User, rs); err != nil {
		return err
	}
	if failed {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

var marks = map[doctor.Status]string{doctor.OK: "✓", doctor.Warn: "!", doctor.Fail: "✗"}

// Print writes the table: one line per check, and its fix below a check
// that is not fine. Details may quote a card's files: printed clean.
func Print(w io.Writer, user string, rs []doctor.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", marks[r.Status], r.Name, termtext.OneLine(r.Detail, 0))
		if r.Fix != "" && r.Status != doctor.OK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", termtext.OneLine(r.Fix, 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var fails, warns []string
	for _, r := range rs {
		switch {
		case r.Status == doctor.Fail && r.Required:
			fails = append(fails, r.Name)
		case r.Status != doctor.OK:
			warns = append(warns, r.Name)
		}
	}
	switch {
	case len(fails) > 0:
		_, err := fmt.Fprintf(w, "\n%s: stemctl up will not work until these are fixed: %s\n", user, strings.Join(fails, ", "))
		return err
	case len(warns) > 0:
		_, err := fmt.Fprintf(w, "\n%s is ready for stemctl up; warnings: %s\n", user, strings.Join(warns, ", "))
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s is ready for stemctl up\n", user)
	return err
}
