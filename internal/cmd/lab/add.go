package lab

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/doctor"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/levels"
)

// AddOptions are add's and import's inputs.
type AddOptions struct {
	F *cmdutil.Factory
	common
	Names []string
	// File is import's CSV ("" for add).
	File    string
	Host    string
	Images  []string
	Cards   string
	KeyFile string
	Teacher string
	Level   string
	JSON    bool
	// Prune is update's.
	Prune bool
}

// NewCmdAdd builds `stemctl lab add NAME...`.
func NewCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{F: f, common: common{Geteuid: os.Geteuid, Records: true}}
	cmd := &cobra.Command{
		Use:   "add NAME...",
		Short: "Create or prepare student accounts for stem (root)",
		Long: `add makes each account ready for stemctl up, creating it when it is missing:
subordinate ids no other account has, a runtime directory that survives
logout, the Podman configuration this host needs, stem's images (read from
the shared image store root fills, --shared-store; an account that cannot use
FUSE loads its own copy instead, and the steps say which), the course's cards in its workspace (never
replacing a card that is there), a git identity and, with --grant, the
teacher's access (the student's own grant: stemctl access list shows it and
stemctl access revoke ends it). Each step prints ok, already or failed.

It adds each account to the lab's roster, name,USER@HOST, which the teacher
imports with stemctl class import.`,
		Example: `  stemctl lab add anna ben
  stemctl lab add anna --cards /srv/course/cards --image localhost/stem-native-amd64:latest
  stemctl lab add anna --cards https://git.example.edu/course/cards.git
  stemctl lab add anna --grant kowalski.pub --teacher kowalski --level observe`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			if err := opts.check(); err != nil {
				return err
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunAdd)
		},
	}
	opts.addFlags(cmd)
	return cmd
}

func (o *AddOptions) addFlags(cmd *cobra.Command) {
	o.common.flags(cmd)
	cmd.Flags().StringVar(&o.Host, "host", "", "this machine's name in the roster's USER@HOST (default its host name)")
	cmd.Flags().StringArrayVar(&o.Images, "image", nil, "an image of root's Podman every account gets (repeat; default every stem image root has)")
	cmd.Flags().StringVar(&o.Cards, "cards", "", "the course's cards: a directory of SERIES/CARD/stem.toml, or a git repository holding one (URL, user@host:path or PATH.git; #REF for a branch or tag); default the ones lab init --cards recorded")
	cmd.Flags().StringVar(&o.KeyFile, "grant", "", "the teacher's automation public key file: grant it to every account")
	cmd.Flags().StringVar(&o.Teacher, "teacher", "", "the teacher's name for --grant")
	cmd.Flags().StringVar(&o.Level, "level", "", "observe, assist or full, for --grant")
	cmdutil.AddJSONFlag(cmd, &o.JSON)
}

func (o *AddOptions) check() error {
	if (o.KeyFile != "") != (o.Level != "") || (o.KeyFile != "") != (o.Teacher != "") {
		return cmdutil.FlagErrorf("--grant, --teacher and --level go together")
	}
	if o.Level != "" {
		if _, err := levels.Parse(o.Level); err != nil {
			return cmdutil.FlagErrorf("--level: %v", err)
		}
	}
	return nil
}

// RunAdd prepares the named accounts.
func RunAdd(ctx context.Context, opts *AddOptions) error {
	var students []lab.Student
	for _, n := range opts.Names {
		students = append(students, lab.Student{Name: n})
	}
	return enrol(ctx, opts, "add", students)
}

func enrol(ctx context.Context, opts *AddOptions, verb string, students []lab.Student) error {
	return prepare(ctx, opts, verb, func(o *lab.Options) ([]lab.Step, error) { return lab.Add(ctx, o, students) })
}

// prepare builds the lab's options from the flags, runs do, and prints
// its steps.
func prepare(ctx context.Context, opts *AddOptions, verb string, do func(*lab.Options) ([]lab.Step, error)) error {
	if err := opts.needRoot(verb); err != nil {
		return err
	}
	o, err := opts.options(opts.F)
	if err != nil {
		return err
	}
	if opts.Host != "" {
		o.Host = opts.Host
	}
	o.Cards = opts.Cards
	if o.Cards == "" {
		// The course's cards, if lab init recorded them.
		if o.Cards, err = lab.CourseCards(o.Dir); err != nil {
			return err
		}
	}
	if lab.IsGitSource(o.Cards) {
		if !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "cards: cloning %s\n", o.Cards)
		}
		dir, err := lab.FetchCards(ctx, o.Dir, o.Cards)
		if err != nil {
			return fmt.Errorf("--cards: %w", err)
		}
		o.Cards = dir
	}
	o.Prune = opts.Prune
	o.Images = opts.Images
	if len(o.Images) == 0 {
		o.Images = presentImages(ctx)
	}
	if opts.KeyFile != "" {
		data, err := os.ReadFile(opts.KeyFile)
		if err != nil {
			return fmt.Errorf("--grant: %w", err)
		}
		o.Grant = &lab.Grant{Teacher: opts.Teacher, Key: strings.TrimSpace(string(data)), Level: opts.Level}
	}
	ios := opts.F.IOStreams
	if !opts.JSON {
		o.Progress = progress(ios.Out)
	}
	steps, err := do(o)
	if opts.JSON {
		if steps == nil {
			steps = []lab.Step{}
		}
		if jerr := cmdutil.WriteJSON(ios.Out, steps); jerr != nil {
			return jerr
		}
	} else if err == nil {
		fmt.Fprintf(ios.Out, "\nevery account is ready; the teacher imports the roster with: stemctl class import CLASS %s\n", lab.RosterPath(o.Dir))
	}
	return failure(ios.ErrOut, err)
}

// presentImages are stem's images root's Podman has.
func presentImages(ctx context.Context) []string {
	var out []string
	for _, img := range doctor.Images() {
		if lab.HasRootImage(ctx, img.Ref) {
			out = append(out, img.Ref)
		}
	}
	return out
}
