package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/doctor"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
)

// InitOptions are init's inputs.
type InitOptions struct {
	F *cmdutil.Factory
	common
	Prefix string
	Images []string
	Cards  string
}

// NewCmdInit builds `stemctl lab init`.
func NewCmdInit(f *cmdutil.Factory, runF func(context.Context, *InitOptions) error) *cobra.Command {
	opts := &InitOptions{F: f, common: common{Geteuid: os.Geteuid, Records: true}}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Install stem for every account of this machine (root)",
		Long: `init copies stemctl, stem-mcp and stem-dial from beside this stemctl into
--prefix (default /usr/local/bin), where every account can run them, makes
/dev/fuse usable by every account (now, and at boot by a udev rule), and loads
stem's images that root's Podman has (or the --image ones) into the shared
image store (--shared-store), which lab add and import point each account
at, and, with --cards, records the course's cards (a directory or a git
repository) in the lab's directory: add, import and update then copy them
when they are given no --cards. A program, image or source already there is
left.`,
		Example: `  stemctl lab init
  stemctl lab init --cards https://git.example.edu/course/cards.git
  stemctl lab init --prefix /opt/stem/bin`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunInit),
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "/usr/local/bin", "where to install the programs")
	cmd.Flags().StringVar(&opts.Cards, "cards", "", "the course's cards for every account: a directory of SERIES/CARD/stem.toml, or a git repository holding one (#REF for a branch or tag)")
	cmd.Flags().StringArrayVar(&opts.Images, "image", nil, "an image of root's Podman to share (repeat; default every stem image root has)")
	opts.common.flags(cmd)
	return cmd
}

// RunInit installs the programs and reports the images.
func RunInit(ctx context.Context, opts *InitOptions) error {
	if err := opts.needRoot("init"); err != nil {
		return err
	}
	self, err := opts.F.Self()
	if err != nil {
		return err
	}
	o, err := opts.options(opts.F)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	o.Progress = progress(out)
	_, err = lab.Install(filepath.Dir(self), opts.Prefix, o.Progress)
	if opts.Cards != "" {
		st := lab.SetCourseCards(ctx, o.Dir, opts.Cards)
		o.Progress(st)
		if st.Result == lab.Failed && err == nil {
			err = fmt.Errorf("--cards: %s", st.Detail)
		}
	}
	refs := opts.Images
	if len(refs) == 0 {
		for _, img := range doctor.Images() {
			refs = append(refs, img.Ref)
		}
	}
	for _, ref := range refs {
		if !lab.HasRootImage(ctx, ref) {
			fmt.Fprintf(out, "system: image %s ... missing (make images / make agent-image in the stem checkout)\n", ref)
			if len(opts.Images) > 0 && err == nil {
				err = fmt.Errorf("--image %s: root's Podman has no such image", ref)
			}
			continue
		}
		o.Images = append(o.Images, ref)
	}
	if _, serr := lab.Share(ctx, o); err == nil {
		err = serr
	}
	return failure(opts.F.IOStreams.ErrOut, err)
}
