// Package attach implements `stemctl attach`: the caller's terminal joins the
// student's tmux session (the same one agents see).
package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/creack/pty"
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/probe"
)

// Options are attach's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	ReadOnly bool
}

// NewCmdAttach builds the command.
func NewCmdAttach(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "attach INSTANCE",
		Short: "Join the instance's tmux session from your terminal",
		Long: `Attach your terminal to the student's tmux session in the instance. Detach with
the tmux prefix followed by d (C-b d by default); the session keeps running.

The host's tmux talks to the container's server directly when both are the same
version; otherwise stemctl runs the tmux client inside the container. When stdin is
not a terminal, stemctl gives tmux a pseudo-terminal and relays the streams.
--read-only is a courtesy (tmux's read-only mode), not a security boundary.`,
		Example: `  stemctl attach native-amd64-demo-hello-t1
  stemctl attach hazard3-sim-inf-bss-t4 --read-only`,
		Args:              cmdutil.ExactArgs(1, "INSTANCE"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Instance = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.ReadOnly, "read-only", "r", false, "attach as a read-only tmux client")
	return cmd
}

// Run attaches.
func Run(ctx context.Context, opts *Options) error {
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	rec, err := m.Running(ctx, opts.Instance)
	if err != nil {
		return err
	}
	sock := rec.Dir().Tmux()
	args := []string{"-S", sock, "attach-session", "-t", instance.SessionName}
	if opts.ReadOnly {
		args = append(args, "-r")
	}
	if err := probe.Tmux(ctx, sock); err != nil {
		if !errors.Is(err, probe.ErrTmuxVersion) && !errors.Is(err, probe.ErrNoHostTmux) {
			return fmt.Errorf("attach %s: %w", rec.Instance, err)
		}
		// Different tmux versions (or none on the host): run the client
		// inside the container.
		code, err := cmdutil.ExecInteractive(ctx, opts.F, m, rec.Instance, engine.ExecSpec{Cmd: append([]string{"tmux"}, args...)}, "always")
		if err != nil {
			return err
		}
		return exitCode(code)
	}
	cmd := exec.CommandContext(ctx, "tmux", args...)
	cmd.Env = append(os.Environ(), "TMUX=") // allow attaching from inside another tmux
	ios := opts.F.IOStreams
	if ios.IsStdinTTY() && ios.IsStdoutTTY() {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ios.In, ios.Out, ios.ErrOut
		return clientResult(cmd.Run())
	}
	return attachPTY(cmd, ios.In, ios.Out)
}

// attachPTY runs the tmux client on a new pseudo-terminal and relays it to
// non-terminal streams (scripts, tests, a web terminal).
func attachPTY(cmd *exec.Cmd, in io.Reader, out io.Writer) error {
	cols, rows := envSize("COLUMNS", 120), envSize("LINES", 40)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return fmt.Errorf("start tmux on a pseudo-terminal: %w", err)
	}
	defer f.Close()
	go io.Copy(f, in)
	io.Copy(out, f) // returns when the client exits and the pty closes
	return clientResult(cmd.Wait())
}

func envSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 && n < 1000 {
		return n
	}
	return def
}

// clientResult maps the tmux client's exit to ours.
func clientResult(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("tmux attach: %w", err)
	}
	return nil
}

func exitCode(code int) error {
	if code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}
