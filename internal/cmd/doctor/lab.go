package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lab"
)

// LabOptions are lab doctor's inputs.
type LabOptions struct {
	F    *cmdutil.Factory
	Name string
	JSON bool
	// Geteuid is os.Geteuid (tests).
	Geteuid func() int
}

// NewCmdLabDoctor builds `stemctl lab doctor NAME`.
func NewCmdLabDoctor(f *cmdutil.Factory, runF func(context.Context, *LabOptions) error) *cobra.Command {
	opts := &LabOptions{F: f, Geteuid: os.Geteuid}
	cmd := &cobra.Command{
		Use:   "doctor NAME",
		Short: "Check another account as that account (root only)",
		Long: `lab doctor runs stemctl doctor as the account NAME, with that account's
login environment (its home, its runtime directory /run/user/UID, its own
Podman), so an administrator sees what the student would. It needs root.`,
		Example: `  stemctl lab doctor alice
  stemctl lab doctor alice --json | jq -r '.checks[] | select(.status == "fail") | .fix'`,
		Args: cmdutil.ExactArgs(1, "the account's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunLab)
		},
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunLab runs this stemctl's doctor as the account.
func RunLab(ctx context.Context, opts *LabOptions) error {
	if opts.Geteuid() != 0 {
		return errors.New("stemctl lab doctor needs root (it runs the checks as another account); for your own account run `stemctl doctor`")
	}
	a, err := lab.Lookup(opts.Name)
	if err != nil {
		return err
	}
	self, err := opts.F.Self()
	if err != nil {
		return err
	}
	args := []string{"doctor"}
	if opts.JSON {
		args = append(args, "--json")
	}
	cmd := a.Command(ctx, self, args...)
	if fi, err := os.Stat(a.Home); err != nil || !fi.IsDir() {
		cmd.Dir = "/"
	}
	cmd.Stdout, cmd.Stderr = opts.F.IOStreams.Out, opts.F.IOStreams.ErrOut
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return &cmdutil.ExitError{Code: ee.ExitCode()}
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s cannot run %s: install stemctl and stem-mcp where every account can (e.g. /usr/local/bin): %w", a.Name, self, err)
	case err != nil:
		return fmt.Errorf("run stemctl doctor as %s: %w", a.Name, err)
	}
	return nil
}
