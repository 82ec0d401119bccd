package lab

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
)

// NewCmdUpdate builds `stemctl lab update [NAME...]`.
func NewCmdUpdate(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{F: f, common: common{Geteuid: os.Geteuid, Records: true}}
	cmd := &cobra.Command{
		Use:   "update [NAME...]",
		Short: "Roll new images and cards out to every lab account (root)",
		Long: `update runs lab add's steps for every account of the lab's roster (or the
named ones), without making accounts: an account whose copy of an image has
another id than root's loads root's, cards the workspace lacks are copied,
and anything else missing is made. A student's cards and files are never
changed: a card already in the workspace stays the student's.

A new image goes into the shared image store beside the one it replaces,
which stays (untagged) for the students' containers made from it. --prune
then removes every shared image no name points at and no container of the
roster's accounts uses.`,
		Example: `  stemctl lab update
  stemctl lab update --prune
  stemctl lab update anna --image localhost/stem-native-amd64:latest --cards /srv/course/cards`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			if err := opts.check(); err != nil {
				return err
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunUpdate)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().BoolVar(&opts.Prune, "prune", false, "then remove the shared images nothing uses")
	return cmd
}

// RunUpdate updates the accounts.
func RunUpdate(ctx context.Context, opts *AddOptions) error {
	return prepare(ctx, opts, "update", func(o *lab.Options) ([]lab.Step, error) { return lab.Update(ctx, o, opts.Names) })
}
