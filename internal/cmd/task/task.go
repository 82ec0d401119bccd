// Package task implements the task verbs `stemctl build|test|run|deploy`,
// which run the card manifest's command for the task inside its instance.
package task

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/workspace"
)

// Verb is one of the manifest's commands.
type Verb string

const (
	Build  Verb = "build"
	Test   Verb = "test"
	Run    Verb = "run"
	Deploy Verb = "deploy"
)

// Options are a task verb's inputs.
type Options struct {
	F       *cmdutil.Factory
	Verb    Verb
	Args    []string
	Target  string
	Devices []string
	TTY     string
	Print   bool
	// Dir is where the instance is looked for without a name (default:
	// the current directory).
	Dir string
}

var blurbs = map[Verb]string{
	Build:  "Build the task inside its instance (the manifest's build command)",
	Test:   "Run the task's tests inside its instance",
	Run:    "Run the task's program inside its instance",
	Deploy: "Flash the task to the named device (rp2350)",
}

// examples for --help: deploy only makes sense on rp2350 with a device.
func examples(verb Verb) string {
	if verb == Deploy {
		return `  stemctl up rp2350 demo hello 3 --device /dev/ttyACM0
  stemctl deploy rp2350-demo-hello-t3-rv
  stemctl deploy rp2350-demo-hello-t3-rv --print`
	}
	return fmt.Sprintf(`  stemctl %[1]s native-amd64 demo hello 1
  stemctl %[1]s hazard3-sim-inf-bss-t4
  stemctl %[1]s hazard3-sim-inf-bss-t4 --print`, verb)
}

// NewCmd builds the command for verb.
func NewCmd(f *cmdutil.Factory, verb Verb, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f, Verb: verb}
	v := string(verb)
	cmd := &cobra.Command{
		Use:   v + " [INSTANCE | " + cmdutil.TaskArgs + "]",
		Short: blurbs[verb],
		Long: blurbs[verb] + `.

Give an instance name, or PROFILE SERIES CARD TASK (the instance is started or
reused first, as with ` + "`stemctl up`" + `), or nothing in a task's directory of
the card (the instance of that task). The command comes from the card's
stem.toml at the moment you run this, so edits to the manifest apply at once. The
exit status is the command's.`,
		Example:           examples(verb),
		Args:              cmdutil.InstanceOrTask(v),
		ValidArgsFunction: cmdutil.CompleteTask(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunVerb)
		},
	}
	cmdutil.AddTaskFlags(cmd, &opts.Target, &opts.Devices, 0)
	cmd.Flags().StringVar(&opts.TTY, "tty", "auto", "allocate a terminal: auto, always or never")
	cmd.RegisterFlagCompletionFunc("tty", cmdutil.Fixed("auto", "always", "never"))
	cmd.Flags().BoolVar(&opts.Print, "print", false, "print the command instead of running it")
	return cmd
}

// Command picks the verb's command from resolved commands.
func Command(c workspace.Commands, v Verb) string {
	switch v {
	case Build:
		return c.Build
	case Test:
		return c.Test
	case Run:
		return c.Run
	case Deploy:
		return c.Deploy
	}
	return ""
}

// RunVerb runs the verb.
func RunVerb(ctx context.Context, opts *Options) error {
	var (
		r       *workspace.Resolved
		name    string
		devices []string
		m       *instance.Manager
		err     error
	)
	// A command the task does not have is refused before anything is made.
	if name, r, err = cmdutil.InstanceOrTaskArgs(ctx, opts.F, opts.Dir, opts.Args, opts.Target); err != nil {
		return err
	}
	if r != nil {
		name = instance.Name(r)
		if err := hasCommand(r, opts.Verb); err != nil || opts.Print {
			return printOr(opts, r, err)
		}
		if m, err = opts.F.Manager(ctx); err != nil {
			return err
		}
		if opts.Verb == Deploy && len(opts.Devices) == 0 {
			// Up keeps recorded devices; without any, deploy would make an
			// instance only to refuse.
			if rec, gerr := m.Registry.Get(ctx, name); gerr != nil || rec.Workspace != r.Workspace || len(rec.Devices) == 0 {
				if err := needsDevice(r, name, nil); err != nil {
					return err
				}
			}
		}
		res, err := m.Up(ctx, r, instance.UpOptions{Devices: opts.Devices, KeepRunning: true}) // only `stemctl up` ends a live session
		if err != nil {
			return err
		}
		name, devices = res.Record.Instance, res.Record.Devices
	} else {
		if m, err = opts.F.Manager(ctx); err != nil {
			return err
		}
		rec, err := m.Registry.Find(ctx, name)
		if err != nil {
			return err
		}
		r, err = cmdutil.ResolveRecord(rec)
		if err != nil {
			return err
		}
		name, devices = rec.Instance, rec.Devices
		if err := hasCommand(r, opts.Verb); err != nil || opts.Print {
			return printOr(opts, r, err)
		}
	}
	if opts.Verb == Deploy {
		if err := needsDevice(r, name, devices); err != nil {
			return err
		}
	}
	command := Command(r.Commands, opts.Verb)
	fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: %s in %s: %s\n", opts.Verb, name, command)
	code, err := cmdutil.ExecInteractive(ctx, opts.F, m, name, engine.ExecSpec{
		Cmd:     []string{"bash", "-c", command},
		WorkDir: r.TaskDir,
	}, opts.TTY)
	if err != nil {
		return err
	}
	if code != 0 {
		fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: %s failed with exit status %d\n", opts.Verb, code)
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// hasCommand says when the task declares no command for verb.
func hasCommand(r *workspace.Resolved, v Verb) error {
	if Command(r.Commands, v) == "" {
		return fmt.Errorf("task %s of %s/%s declares no %s command (add `%s = \"...\"` to its [[tasks]] entry in stem.toml)", r.TaskID, r.Series, r.Card, v, v)
	}
	return nil
}

// printOr returns err, or (for --print) prints the command.
func printOr(opts *Options, r *workspace.Resolved, err error) error {
	if err != nil {
		return err
	}
	fmt.Fprintln(opts.F.IOStreams.Out, Command(r.Commands, opts.Verb))
	return nil
}

// needsDevice refuses deploy on a profile with explicit devices when the
// instance has none.
func needsDevice(r *workspace.Resolved, name string, devices []string) error {
	if r.Profile.Devices != profiles.ExplicitDevices || len(devices) > 0 {
		return nil
	}
	return fmt.Errorf("deploy needs the board: no device was passed into %s. Plug in the debug probe (and the Pico 2) and re-create the instance with the probe's USB node, e.g. `stemctl up %s %s %s %s --target %s --device /dev/bus/usb/001/005` (find BUS/DEV with lsusb); add --device /dev/ttyACM0 too for the serial console", name, r.Profile.Name, r.Series, r.Card, r.TaskID, r.Target.Name)
}
