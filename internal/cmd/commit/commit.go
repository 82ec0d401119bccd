// Package commit implements `stemctl commit`: the student's commit of a
// card, with git on the host that runs nothing the container wrote.
package commit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/registry"
)

// Options are commit's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Message  string
	JSON     bool
	// Getwd is the directory a card is found from without INSTANCE.
	Getwd func() (string, error)
	// Env is git's environment before hardening (os.Environ).
	Env []string
}

// NewCmdCommit builds the command.
func NewCmdCommit(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f, Getwd: os.Getwd}
	cmd := &cobra.Command{
		Use:   "commit [INSTANCE] -m MESSAGE",
		Short: "Commit your work in the card (git on the host that runs nothing from the container)",
		Long: `Stage every change in the card repository (except stem's .stem/ and .rv/) and
commit it, with git on the host. Inside a task container the card's .git is
read-only, so this is how a student commits.

The card is INSTANCE's, or without it the card the current directory is in.
git runs pinned to the card's own .git (the one the instances were given
read-only, checked by inode), with the system config off and no hook,
fsmonitor, pager, editor, filter, textconv, merge driver, credential helper,
signing program or network protocol, and it refuses configuration included
from a file in the card. A card whose .git was replaced, or that holds a
nested repository, is refused with the paths and what to do.

git never reads the card itself: stem reads each file with no symlink
followed (a symlink is committed as its link text), so whatever the
container does meanwhile, the commit holds only what the card holds. A
FIFO, socket or device to be committed is refused, and so is a card past
20,000 files, 100 MiB for one file or 1 GiB in all (list such files in
.gitignore). Plain git add on the host while the container runs is racy:
commit with stemctl commit, or stop the instance first (stemctl down).

Push, pull and look at history with git as usual in the card's root directory.`,
		Example: `  stemctl commit -m "task 4: bss cleared before main"
  stemctl commit hazard3-sim-inf-bss-t4 -m "first try"`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Instance = args[0]
			}
			if strings.TrimSpace(opts.Message) == "" {
				return cmdutil.FlagErrorf("a commit message is required: -m MESSAGE")
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().StringVarP(&opts.Message, "message", "m", "", "the commit message")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run finds the card and commits.
func Run(ctx context.Context, opts *Options) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	reg, err := opts.F.Registry()
	if err != nil {
		return err
	}
	card, err := findCard(ctx, opts, reg)
	if err != nil {
		return err
	}
	recs, err := reg.List(ctx)
	if err != nil {
		return err
	}
	var want []cardgit.Identity
	for _, r := range recs {
		if r.CardPath == card && r.Git != nil {
			want = append(want, *r.Git)
		}
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		out = opts.F.IOStreams.ErrOut
	}
	res, err := cardgit.Commit(ctx, cardgit.CommitOptions{Card: card, Want: want, Message: opts.Message, Env: env, Out: out})
	if errors.Is(err, cardgit.ErrNothing) {
		if opts.JSON {
			return cmdutil.WriteJSON(opts.F.IOStreams.Out, res)
		}
		fmt.Fprintf(opts.F.IOStreams.Out, "nothing to commit in %s\n", card)
		return nil
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, res)
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "committed %.12s in %s\n", res.Commit, card)
	return nil
}

// findCard is INSTANCE's card, or the card (<workspace>/<series>/<card>)
// the current directory is in.
func findCard(ctx context.Context, opts *Options, reg *registry.Registry) (string, error) {
	if opts.Instance != "" {
		rec, err := reg.Find(ctx, opts.Instance)
		if err != nil {
			return "", err
		}
		if rec.CardPath == "" {
			return "", fmt.Errorf("instance %s records no card", rec.Instance)
		}
		return rec.CardPath, nil
	}
	ws, err := opts.F.Workspace()
	if err != nil {
		return "", err
	}
	wd, err := opts.Getwd()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(wd); err == nil {
		wd = real
	}
	rel, err := filepath.Rel(ws.Root, wd)
	parts := strings.Split(rel, string(filepath.Separator))
	if err != nil || rel == "." || parts[0] == ".." || len(parts) < 2 {
		return "", fmt.Errorf("%s is not inside a card of the workspace %s: run stemctl commit in the card, or name the instance (stemctl commit INSTANCE -m MESSAGE)", wd, ws.Root)
	}
	return filepath.Join(ws.Root, parts[0], parts[1]), nil
}
