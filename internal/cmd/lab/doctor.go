package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/termtext"
)

// DoctorOptions are lab doctor's inputs.
type DoctorOptions struct {
	F *cmdutil.Factory
	common
	Name string
	JSON bool
}

// DoctorReport is lab doctor's --json output: stemctl doctor's shape,
// each check with who answered it.
type DoctorReport struct {
	User string `json:"user"`
	UID  int    `json:"uid"`
	Host string `json:"host,omitempty"`
	OK   bool   `json:"ok"`
	// Missing names the failing required checks, or why the account's
	// doctor gave no report (DoctorFix then fixes that).
	Missing   []string     `json:"missing,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	DoctorFix string       `json:"doctor_fix,omitempty"`
	Checks    []lab.Result `json:"checks"`
}

// NewCmdDoctor builds `stemctl lab doctor NAME`.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{F: f, common: common{Geteuid: os.Geteuid}}
	cmd := &cobra.Command{
		Use:   "doctor NAME",
		Short: "Check one student account, root verifying what it can (root)",
		Long: `lab doctor checks the account NAME as lab status does, one line per check
with who answered it and, for a check that is not fine, the command that
fixes it.

Root checks the subordinate ids, the runtime directory (and that it lasts)
and the shared image store itself, from /etc/subuid, /run/user and the mode
bits; the account's own answer to those is dropped. The other checks are
what stemctl doctor, run as the account with its login environment (its
home, /run/user/UID, its own Podman, its default workspace), reports. The
student owns that account and could make it say anything, so those lines
say "account" and their fix is marked as the account's doctor's word.

stemctl and stem-mcp must be where every account can run them (e.g.
/usr/local/bin). The exit status is 1 when a requirement fails.`,
		Example: `  stemctl lab doctor anna
  stemctl lab doctor anna --json | jq -r '.checks[] | select(.status == "fail") | "\(.by): \(.fix)"'`,
		Args: cmdutil.ExactArgs(1, "the account's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunDoctor)
		},
	}
	opts.common.flags(cmd)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunDoctor checks the account and reports.
func RunDoctor(ctx context.Context, opts *DoctorOptions) error {
	if err := opts.needRoot("doctor"); err != nil {
		return fmt.Errorf("%w; for your own account run `stemctl doctor`", err)
	}
	o, err := opts.options(opts.F)
	if err != nil {
		return err
	}
	a, st, err := lab.Doctor(ctx, o, opts.Name)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		rep := DoctorReport{User: a.Name, UID: a.UID, Host: st.Host, OK: st.Ready, Missing: st.Missing,
			Warnings: st.Warnings, DoctorFix: st.DoctorFix, Checks: st.Checks}
		if rep.Checks == nil {
			rep.Checks = []lab.Result{}
		}
		err = cmdutil.WriteJSON(out, rep)
	} else {
		err = printDoctor(out, a.Name, st)
	}
	if err != nil {
		return err
	}
	if !st.Ready {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

var marks = map[doctor.Status]string{doctor.OK: "✓", doctor.Warn: "!", doctor.Fail: "✗"}

// printDoctor writes one line per check with who answered it, and the
// fix below a check that is not fine. An account's answers are printed
// clean: the student wrote them.
func printDoctor(w io.Writer, name string, st lab.Status) error {
	checked := map[string]bool{}
	for _, c := range st.Checks {
		checked[c.Name] = true
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tCHECK\tBY\tDETAIL")
	for _, m := range st.Missing {
		if !checked[m] {
			// The account's doctor gave no report.
			fmt.Fprintf(tw, "✗\tdoctor\troot\t%s\n", termtext.OneLine(m, 0))
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", termtext.OneLine(st.DoctorFix, 0))
		}
	}
	for _, c := range st.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", marks[c.Status], termtext.OneLine(c.Name, 0), c.By, termtext.OneLine(c.Detail, 0))
		if c.Status == doctor.OK || c.Fix == "" {
			continue
		}
		label := "fix"
		if c.By == lab.ByAccount {
			label = "fix (" + name + "'s doctor says)"
		}
		fmt.Fprintf(tw, "\t\t\t%s: %s\n", label, termtext.OneLine(c.Fix, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case !st.Ready:
		fmt.Fprintf(w, "\n%s: stemctl up will not work until these are fixed: %s\n", name, strings.Join(marked(st), ", "))
	case len(st.Warnings) > 0:
		fmt.Fprintf(w, "\n%s is ready for stemctl up; warnings: %s\n", name, strings.Join(st.Warnings, ", "))
	default:
		fmt.Fprintf(w, "\n%s is ready for stemctl up\n", name)
	}
	_, err := fmt.Fprintf(w, "root checked %s itself; the rest is %s's own stemctl doctor's report\n",
		strings.Join(rootChecked(st), ", "), name)
	return err
}

// rootChecked names the checks root answered itself for any of list, in
// the order they were made: what was checked, not what lab could check
// (no shared store, no store check).
func rootChecked(list ...lab.Status) []string {
	seen := map[string]bool{}
	var names []string
	for _, st := range list {
		for _, c := range st.Checks {
			if c.By == lab.ByRoot && !seen[c.Name] {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
		}
	}
	return names
}
