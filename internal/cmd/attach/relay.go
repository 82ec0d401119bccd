package attach

import (
	"context"
	"fmt"
	"os"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/hostterm"
	"github.com/stem-edu/stem/internal/instance"
)

// relay runs the container's tmux client with the caller's streams through
// a hostterm.Relay: its output guarded always; on a terminal, the host
// line on the last row and the answer chord read from the keyboard.
func relay(ctx context.Context, opts *Options, m *instance.Manager, inst string, spec engine.ExecSpec, welcome string) (int, error) {
	ios := opts.F.IOStreams
	in, inFile := ios.InFile()
	onTerm := ios.IsStdinTTY() && ios.IsStdoutTTY() && inFile
	var qs hostterm.Questions
	if onTerm && opts.Questions != nil {
		q, release, err := opts.Questions(inst, hostInput(in))
		if err != nil {
			return -1, err
		}
		defer release()
		qs = q
	}
	var who func() []string
	if onTerm && opts.Questions != nil {
		who = participants(opts.F, inst)
	}
	r := hostterm.New(ios.Out, hostterm.Options{Line: onTerm, Name: inst, Questions: qs, Participants: who, Welcome: welcome})
	spec.Tty = true
	spec.Stdin, spec.Stdout, spec.Stderr = r.Input(ios.In), r.Output(), r.Output()
	if onTerm {
		restore, err := cmdutil.RawTerminal(in)
		if err != nil {
			return -1, fmt.Errorf("terminal raw mode: %w", err)
		}
		defer restore()
		sizes, stop := cmdutil.WatchSize(in)
		defer stop()
		spec.Resize = r.Sizes(sizes)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go r.Run(ctx)
	} else {
		// Not a terminal (a script, a test, a web terminal): the exec
		// session's pseudo-terminal gets COLUMNS x LINES.
		sizes := make(chan engine.TermSize, 1)
		sizes <- engine.TermSize{Rows: envSize(opts.F.Getenv, "LINES", 40), Cols: envSize(opts.F.Getenv, "COLUMNS", 120)}
		spec.Resize = sizes
	}
	return m.Exec(ctx, inst, spec)
}

// hostInput names the terminal the answers come from, for the audit log.
func hostInput(in *os.File) string {
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", in.Fd()))
	if err != nil {
		name = "stdin"
	}
	return "host terminal " + name + " (stemctl attach)"
}
