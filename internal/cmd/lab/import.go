package lab

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
)

// NewCmdImport builds `stemctl lab import FILE.csv`.
func NewCmdImport(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{F: f, common: common{Geteuid: os.Geteuid, Records: true}}
	cmd := &cobra.Command{
		Use:   "import FILE.csv",
		Short: "Create or prepare the accounts of a class list (root)",
		Long: `import does what stemctl lab add does for every row of a CSV file:
name[,full name[,email]] a row (an optional first row "name,..." is a header;
lines starting with # are comments). The full name and email make the
account's git identity (default: the name, and NAME@HOST). Every bad row is
reported, and then nothing is done.`,
		Example: `  stemctl lab import students.csv --cards /srv/course/cards
  stemctl lab import students.csv --grant kowalski.pub --teacher kowalski --level observe --json`,
		Args: cmdutil.ExactArgs(1, "the CSV file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if err := opts.check(); err != nil {
				return err
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunImport)
		},
	}
	opts.addFlags(cmd)
	return cmd
}

// RunImport prepares every account of the file.
func RunImport(ctx context.Context, opts *AddOptions) error {
	if err := opts.needRoot("import"); err != nil {
		return err
	}
	fh, err := os.Open(opts.File)
	if err != nil {
		return err
	}
	defer fh.Close()
	students, err := lab.ReadStudents(opts.File, fh)
	if err != nil {
		return err
	}
	return enrol(ctx, opts, "import", students)
}
