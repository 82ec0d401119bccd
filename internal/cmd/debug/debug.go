// Package debug implements `stemctl debug`: the profile's debugger layout in
// the student's tmux (nvim, program, gdb), with gdb under stem's bridge so
// agents see and drive the same debugger.
package debug

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/registry"
)

// Options are debug's inputs.
type Options struct {
	F       *cmdutil.Factory
	Args    []string
	Target  string
	Devices []string
	Build   bool
	JSON    bool
}

// NewCmdDebug builds the command.
func NewCmdDebug(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "debug [INSTANCE | " + cmdutil.TaskArgs + "]",
		Short: "Open the debugger layout in the task's tmux: nvim, program, gdb",
		Long: `Start (or reuse) the instance, build the task, and open the debugger layout in the
student's tmux window "edit": nvim on the left, with the task's files open (the
manifest's open list, or its editable files; nothing open or unsaved is replaced);
on the right the program pane (the simulator with its gdb stub, or the terminal a
native program runs on) above the gdb pane. The editor follows gdb: a sign and a
highlight on the current line, breakpoint signs, and commands and keys that drive
the same gdb (:StemBreak F9, :StemContinue F5, :StemNext F10, :StemStep F11,
:StemFinish, :StemUntil, :StemRegisters). The student's gdb runs under stem's bridge, so agents at the assist level
see and drive the same debugger (breakpoints, steps, registers) and get its stops
as events. Running debug again replaces the layout.

The commands come from the card's stem.toml: debug (a plain gdb command line) and
debug_program (what runs in the program pane). Without a name, in a task's
directory of the card, it is that task's instance.`,
		Example: `  stemctl debug hazard3-sim inf bss 4
  stemctl debug native-amd64 demo hello 1 --no-build
  stemctl debug native-amd64-demo-hello-t1 --json`,
		Args:              cmdutil.InstanceOrTask("debug"),
		ValidArgsFunction: cmdutil.CompleteTask(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmdutil.AddTaskFlags(cmd, &opts.Target, &opts.Devices, 0)
	noBuild := cmd.Flags().Bool("no-build", false, "do not run the task's build command first")
	cmd.PreRun = func(*cobra.Command, []string) { opts.Build = !*noBuild }
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run opens the layout.
func Run(ctx context.Context, opts *Options) error {
	var rec registry.Record
	name, r, err := cmdutil.InstanceOrTaskArgs(ctx, opts.F, "", opts.Args, opts.Target)
	if err != nil {
		return err
	}
	m, err := opts.F.Manager(ctx)
	if err != nil {
		return err
	}
	if r != nil {
		res, err := m.Up(ctx, r, instance.UpOptions{Devices: opts.Devices, KeepRunning: true}) // only `stemctl up` ends a live session
		if err != nil {
			return err
		}
		rec = res.Record
	} else {
		rec, err = m.Running(ctx, name)
		if err != nil {
			return err
		}
		if r, err = cmdutil.ResolveRecord(rec); err != nil {
			return err
		}
	}
	if opts.Build && r.Commands.Build != "" {
		fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: building %s: %s\n", rec.Instance, r.Commands.Build)
		// The build's output is progress, not the command's result: it goes
		// to stderr so stdout stays the layout (and valid JSON with --json).
		spec := engine.ExecSpec{Cmd: []string{"bash", "-c", r.Commands.Build}, WorkDir: r.TaskDir,
			Stdout: opts.F.IOStreams.ErrOut, Stderr: opts.F.IOStreams.ErrOut}
		code, err := m.Exec(ctx, rec.Instance, spec)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("the build failed (exit status %d); fix it, or open the layout anyway with --no-build", code)
		}
	}
	res, err := m.Debug(ctx, rec, r)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, res)
	}
	out := opts.F.IOStreams.Out
	fmt.Fprintf(out, "%s: debugger layout ready in window \"edit\" (nvim %s | program %s / gdb %s)\n", rec.Instance, res.EditorPane, res.ProgramPane, res.GDBPane)
	if len(res.Files) > 0 {
		names := make([]string, len(res.Files))
		for i, f := range res.Files {
			names[i] = filepath.Base(f)
		}
		fmt.Fprintf(out, "  editor   opens %s; it follows gdb (:StemBreak, :StemNext, ... F5 F9 F10 F11)\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(out, "  attach   stemctl attach %s\n", rec.Instance)
	fmt.Fprintf(out, "  agents   gdb_* tools at the assist level now drive this debugger\n")
	return nil
}
