package lab

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
)

// RmOptions are rm's inputs.
type RmOptions struct {
	F *cmdutil.Factory
	common
	Names []string
}

// NewCmdRm builds `stemctl lab rm NAME...`.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *RmOptions) error) *cobra.Command {
	opts := &RmOptions{F: f, common: common{Geteuid: os.Geteuid}}
	cmd := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Archive a student's work, then remove the account (root)",
		Long: `rm stops everything the account runs, archives its home (without its
Podman storage and caches) to the lab's archive directory, readable by root
only, and only then deletes the account with its home, its runtime directory
and its roster row. An account whose archive fails is left as it is.`,
		Example: `  stemctl lab rm anna
  stemctl lab rm anna ben --lab-dir /srv/lab`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunRm)
		},
	}
	opts.common.flags(cmd)
	return cmd
}

// RunRm removes each account.
func RunRm(ctx context.Context, opts *RmOptions) error {
	if err := opts.needRoot("rm"); err != nil {
		return err
	}
	o, err := opts.options(opts.F)
	if err != nil {
		return err
	}
	o.Progress = progress(opts.F.IOStreams.Out)
	var failed []string
	for _, n := range opts.Names {
		if _, err := lab.Remove(ctx, o, n, time.Now()); err != nil {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "%s: %v\n", n, err)
			failed = append(failed, n)
		}
	}
	if len(failed) > 0 {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}
