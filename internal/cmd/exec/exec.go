// Package exec implements `stemctl exec`.
package exec

import (
	"context"
	"path"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
)

// Options are exec's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Command  []string
	WorkDir  string
	Env      []string
	TTY      string // auto, always, never
}

// NewCmdExec builds the command.
func NewCmdExec(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "exec [INSTANCE] -- COMMAND [ARG...]",
		Short: "Run a command inside a running instance",
		Long: `Run COMMAND inside the instance's container as the student, in the task's
directory. The exit status is the command's. A terminal is allocated when stdin and
stdout are terminals (override with --tty). Without INSTANCE, in a task's
directory of the card, the instance of that task.`,
		Example: `  stemctl exec native-amd64-demo-hello-t1 -- make
  stemctl exec hazard3-sim-inf-bss-t4 -- bash
  stemctl exec native-amd64-demo-hello-t1 --tty never -- ls -la
  stemctl exec -- make`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case dash < 0:
				return cmdutil.FlagErrorf("exec needs -- before the command: stemctl exec [INSTANCE] -- COMMAND [ARG...]")
			case dash > 1:
				return cmdutil.FlagErrorf("exec takes at most one INSTANCE before -- (got %d)", dash)
			case len(args) <= dash:
				return cmdutil.FlagErrorf("exec: no command after --: give the program to run, e.g. stemctl exec INSTANCE -- bash")
			}
			if args[dash] == "" {
				return cmdutil.FlagErrorf("exec: COMMAND is empty: give the program to run after --")
			}
			return nil
		},
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash == 1 {
				opts.Instance = args[0]
			}
			opts.Command = args[dash:]
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().StringVarP(&opts.WorkDir, "workdir", "w", "", "working directory inside the container (default: the task's)")
	cmd.Flags().StringArrayVarP(&opts.Env, "env", "e", nil, "extra environment NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&opts.TTY, "tty", "auto", "allocate a terminal: auto, always or never")
	cmd.RegisterFlagCompletionFunc("tty", cmdutil.Fixed("auto", "always", "never"))
	return cmd
}

// lookupScript runs its arguments after checking that a bare command name
// exists: for one that does not, the OCI runtime's own failure is two
// "Error: runc: exec failed ..." lines from Podman; this says it plainly,
// with the shell's exit status for "not found" (127).
const lookupScript = `case $1 in */*) ;; *) command -v -- "$1" >/dev/null 2>&1 || { printf 'stemctl exec: %s: command not found in the instance\n' "$1" >&2; exit 127; } ;; esac
exec "$@"`

// withLookup wraps cmd in lookupScript (sh is in every stem image).
func withLookup(cmd []string) []string {
	return append([]string{"/bin/sh", "-c", lookupScript, "stemctl-exec"}, cmd...)
}

// Run executes the command and returns its exit status as an ExitError.
func Run(ctx context.Context, opts *Options) error {
	// Check the inputs before connecting to Podman: a typo should not wait
	// for (or start) the service.
	if opts.WorkDir != "" && !path.IsAbs(opts.WorkDir) {
		return cmdutil.FlagErrorf("--workdir %q: give an absolute path inside the container (the default is the task's directory)", opts.WorkDir)
	}
	env, err := cmdutil.ParseEnv(opts.Env)
	if err != nil {
		return err
	}
	inst, err := cmdutil.InstanceOr(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	code, err := cmdutil.ExecInteractive(ctx, opts.F, m, inst, engine.ExecSpec{Cmd: withLookup(opts.Command), Env: env, WorkDir: opts.WorkDir}, opts.TTY)
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}
