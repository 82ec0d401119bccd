package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunLab(cmd.Context(), opts)
		},
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// loginPath is the PATH a login shell of an ordinary account gets.
const loginPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// RunLab runs this stemctl's doctor as the account.
func RunLab(ctx context.Context, opts *LabOptions) error {
	if opts.Geteuid() != 0 {
		return errors.New("stemctl lab doctor needs root (it runs the checks as another account); for your own account run `stemctl doctor`")
	}
	u, err := user.Lookup(opts.Name)
	if err != nil {
		return fmt.Errorf("account %q: %w", opts.Name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("account %s has a non-numeric uid or gid (%s:%s)", u.Username, u.Uid, u.Gid)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	self, err := opts.F.Self()
	if err != nil {
		return err
	}
	args := []string{"doctor"}
	if opts.JSON {
		args = append(args, "--json")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username,
		"PATH=" + loginPath, "XDG_RUNTIME_DIR=/run/user/" + u.Uid, "LANG=C.UTF-8"}
	cmd.Dir = "/"
	if fi, err := os.Stat(u.HomeDir); err == nil && fi.IsDir() {
		cmd.Dir = u.HomeDir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	cmd.Stdout, cmd.Stderr = opts.F.IOStreams.Out, opts.F.IOStreams.ErrOut
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return &cmdutil.ExitError{Code: ee.ExitCode()}
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s cannot run %s: install stemctl and stem-mcp where every account can (e.g. /usr/local/bin): %w", u.Username, self, err)
	case err != nil:
		return fmt.Errorf("run stemctl doctor as %s: %w", u.Username, err)
	}
	return nil
}
