// Package attach implements `stemctl attach`: the caller's terminal joins the
// student's tmux session (the same one agents see).
package attach

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/hostterm"
	"github.com/stem-edu/stem/internal/instance"
)

// Options are attach's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	ReadOnly bool
	// Questions opens the instance's decision spool for the host line,
	// named by the host input that answers; nil shows no questions.
	Questions func(instance, input string) (hostterm.Questions, func(), error)
}

// NewCmdAttach builds the command.
func NewCmdAttach(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f, Questions: spoolQuestions(f)}
	cmd := &cobra.Command{
		Use:   "attach [INSTANCE]",
		Short: "Join the instance's tmux session from your terminal",
		Long: `Attach your terminal to the student's tmux session in the instance. Detach with
the tmux prefix followed by d (C-b d by default); the session keeps running.

The host line. On a terminal, the last row belongs to stemctl, not to the
container: tmux gets one row less, and the line shows the questions that wait
for your answer (an agent asks to run something, for example) or, when none,
the instance's name; and who is connected to the session now, each with its
level (an agent, your teacher's grant). Nothing in the container can write on
it or change who it names.

To answer, press Ctrl-] and then, as separate keys, y (yes), n (no) or a (allow
everything that agent asks for 10 minutes, which asks once more: y confirms).
Esc cancels. Keys you type for anything else go to the session as always: a
question never takes a key, and a chord pasted or typed together with other
keys answers nothing. Programs and tmux clients in the container cannot
answer; only this terminal's keyboard can.

The tmux client runs inside the container (through Podman), never on the host:
an attached tmux client does what its server tells it, including running a
command when it detaches, and the server is the container's. Its output is
filtered on the way to your terminal: what draws the screen passes; clipboard
writes (OSC 52), passthrough and other escape strings, and queries whose answers
your terminal would type back are dropped (docs/security.md lists them).
When stdin is not a terminal, the client gets a pseudo-terminal of COLUMNS x
LINES and the streams are relayed (filtered, without the host line).
--read-only is a courtesy (tmux's read-only mode), not a security boundary.`,
		Example: `  stemctl attach native-amd64-demo-hello-t1
  stemctl attach hazard3-sim-inf-bss-t4 --read-only`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE:              cmdutil.RunEOptional(&opts.Instance, opts, runF, Run),
	}
	cmd.Flags().BoolVarP(&opts.ReadOnly, "read-only", "r", false, "attach as a read-only tmux client")
	return cmd
}

// Run attaches. The tmux client always runs inside the container: an
// attached tmux client obeys its server (detach-client -E and lock-command
// make it run a shell command in its own process), and the server is the
// container's, so a client on the host would let anything in the container
// run commands on the host.
func Run(ctx context.Context, opts *Options) error {
	if opts.Instance == "" {
		here, err := cmdutil.InstanceHere(ctx, opts.F, "")
		if err != nil {
			return err
		}
		opts.Instance = here
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	rec, err := m.Running(ctx, opts.Instance)
	if err != nil {
		return err
	}
	args := []string{"tmux", "-S", rec.Dir().Tmux(), "attach-session", "-t", instance.SessionName}
	if opts.ReadOnly {
		args = append(args, "-r")
	}
	spec := engine.ExecSpec{Cmd: args, Env: map[string]string{"TERM": containerTerm(opts.F.Getenv("TERM"))}}
	code, err := relay(ctx, opts, m, rec.Instance, spec, welcome(opts))
	if err != nil {
		return fmt.Errorf("attach %s: %w", rec.Instance, err)
	}
	return exitCode(code)
}

// containerTerm is the TERM the container's tmux client gets: the caller's
// when the image surely has its terminfo entry, else xterm-256color.
func containerTerm(t string) string {
	for _, p := range []string{"xterm", "screen", "tmux", "linux", "vt100", "vt220", "rxvt", "dumb"} {
		if t == p || strings.HasPrefix(t, p+"-") {
			return t
		}
	}
	return "xterm-256color"
}

func envSize(getenv func(string) string, name string, def int) int {
	if n, err := strconv.Atoi(getenv(name)); err == nil && n > 0 && n < 1000 {
		return n
	}
	return def
}

func exitCode(code int) error {
	if code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// welcome is the host line's first note for a student attaching for the
// first time on a terminal, once per account ("" after that).
func welcome(opts *Options) string {
	ios := opts.F.IOStreams
	if opts.Questions == nil || !ios.IsStdinTTY() || !ios.IsStdoutTTY() {
		return ""
	}
	dirs, err := opts.F.Dirs()
	if err != nil {
		return ""
	}
	mark := filepath.Join(dirs.State, "attach-welcomed")
	if _, err := os.Stat(mark); err == nil {
		return ""
	}
	if os.MkdirAll(dirs.State, 0o700) != nil || os.WriteFile(mark, nil, 0o600) != nil {
		return ""
	}
	return welcomeText
}

// welcomeText is short: it follows the instance's name and who is
// connected on one row.
const welcomeText = "new here? C-b n/p windows · C-b d detach · docs/student.md"
