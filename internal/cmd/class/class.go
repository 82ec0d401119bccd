// Package class implements `stemctl class`: on the teacher's machine, a
// roster of students per class (package internal/class keeps it) and the
// status of the whole class at once.
package class

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/termtext"
)

// NewCmdClass builds the group.
func NewCmdClass(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "class <command>",
		Short: "A class of students: its roster, and everyone's status at once",
		Long: `Run these on the teacher's machine. A class is a roster of students, each a
USER@HOST reached over SSH with the teacher's automation key (see "stemctl
teacher"). The roster is a TOML file you may edit by hand:
~/.config/stem/classes/NAME.toml ($STEM_CONFIG_DIR/classes/NAME.toml).`,
	}
	cmd.AddCommand(newCmdInit(f, nil), newCmdAdd(f, nil), newCmdImport(f, nil), newCmdList(f, nil),
		newCmdRm(f, nil), NewCmdStatus(f, nil), NewCmdServe(f, nil))
	return cmd
}

// configDir is stem's config directory.
func configDir(f *cmdutil.Factory) (string, error) {
	d, err := f.Dirs()
	if err != nil {
		return "", err
	}
	if d.Config == "" {
		return "", fmt.Errorf("no config directory: set HOME or STEM_CONFIG_DIR")
	}
	return d.Config, nil
}

// absKey makes a --key value absolute (the roster is read from anywhere).
func absKey(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "~/") {
		return key, nil
	}
	abs, err := filepath.Abs(key)
	if err != nil {
		return "", fmt.Errorf("key path %s: %w", key, err)
	}
	return abs, nil
}

// InitOptions are `class init`'s inputs.
type InitOptions struct {
	F          *cmdutil.Factory
	Name       string
	Key        string
	SSHOptions []string
}

func newCmdInit(f *cmdutil.Factory, runF func(context.Context, *InitOptions) error) *cobra.Command {
	opts := &InitOptions{F: f}
	cmd := &cobra.Command{
		Use:   "init NAME [--key FILE]",
		Short: "Make an empty class",
		Long: `Make the roster file of a new class. --key is the automation key for every
student (default: the only one "stemctl access keygen" made in ~/.ssh);
--ssh-option adds ssh -o options for every student, such as the known_hosts
file of a lab.`,
		Example: `  stemctl class init lab3
  stemctl class init lab3 --key ~/.ssh/stem_kowalski --ssh-option UserKnownHostsFile=~/lab3.known_hosts`,
		Args: cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, runInit)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "the automation private key `FILE` for every student")
	cmd.Flags().StringArrayVar(&opts.SSHOptions, "ssh-option", nil, "extra ssh -o `KEY=VALUE` for every student (repeatable)")
	return cmd
}

func runInit(ctx context.Context, opts *InitOptions) error {
	cfg, err := configDir(opts.F)
	if err != nil {
		return err
	}
	key, err := absKey(opts.Key)
	if err != nil {
		return err
	}
	r, err := class.Init(ctx, cfg, opts.Name, class.Settings{Key: key, SSHOptions: opts.SSHOptions})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "made class %s (%s); add students with: stemctl class add %s USER@HOST\n", r.Name, r.Path, r.Name)
	return nil
}

// AddOptions are `class add`'s inputs.
type AddOptions struct {
	F     *cmdutil.Factory
	Class string
	Host  string
	Port  int
	Key   string
	As    string
}

func newCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{F: f}
	cmd := &cobra.Command{
		Use:   "add NAME USER@HOST [--port N] [--key FILE] [--as STUDENT]",
		Short: "Add a student to a class",
		Long: `Add one student: their account on their machine. The student's name in the
class is the USER part unless --as gives another (names are unique in a class,
whatever their case; so is each USER@HOST:PORT).`,
		Example: `  stemctl class add lab3 anna@lab-03
  stemctl class add lab3 anna@lab-server --port 2222 --as anna.k
  stemctl class add lab3 bob@lab-04 --key ~/.ssh/stem_other`,
		Args: cmdutil.ExactArgs(2, "NAME USER@HOST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Class, opts.Host = args[0], args[1]
			return cmdutil.RunOr(cmd.Context(), opts, runF, runAdd)
		},
	}
	cmd.Flags().IntVar(&opts.Port, "port", 0, "SSH `PORT` on the student's machine (default 22)")
	cmd.Flags().StringVar(&opts.Key, "key", "", "the automation private key `FILE` for this student (default: the class's)")
	cmd.Flags().StringVar(&opts.As, "as", "", "the student's `NAME` in the class (default: USER)")
	return cmd
}

func runAdd(ctx context.Context, opts *AddOptions) error {
	cfg, err := configDir(opts.F)
	if err != nil {
		return err
	}
	key, err := absKey(opts.Key)
	if err != nil {
		return err
	}
	name := opts.As
	if name == "" {
		user, _, ok := strings.Cut(opts.Host, "@")
		if !ok {
			return cmdutil.FlagErrorf("%q is not USER@HOST: give the student's account on their machine, e.g. anna@lab-03", opts.Host)
		}
		name = user
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return cmdutil.FlagErrorf("--port %d is not a TCP port (1-65535)", opts.Port)
	}
	r, err := class.Add(ctx, cfg, opts.Class, []class.Student{{Name: name, Host: opts.Host, Port: opts.Port, Key: key}})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "added %s (%s) to class %s: %d students\n", name, opts.Host, r.Name, len(r.Students))
	return nil
}

// ImportOptions are `class import`'s inputs.
type ImportOptions struct {
	F     *cmdutil.Factory
	Class string
	File  string
}

func newCmdImport(f *cmdutil.Factory, runF func(context.Context, *ImportOptions) error) *cobra.Command {
	opts := &ImportOptions{F: f}
	cmd := &cobra.Command{
		Use:   "import NAME FILE.csv",
		Short: "Add the students of a CSV file to a class",
		Long: `Add every student of a CSV file (a spreadsheet's export): one row per student,
columns name, host (USER@HOST) and an optional port; a first row
"name,host,port" is a header, and lines starting with # are comments. Every bad
row is reported with its line, and then nobody is added.`,
		Example: `  stemctl class import lab3 lab3.csv`,
		Args:    cmdutil.ExactArgs(2, "NAME FILE.csv"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Class, opts.File = args[0], args[1]
			return cmdutil.RunOr(cmd.Context(), opts, runF, runImport)
		},
	}
	return cmd
}

func runImport(ctx context.Context, opts *ImportOptions) error {
	cfg, err := configDir(opts.F)
	if err != nil {
		return err
	}
	fh, err := os.Open(opts.File)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer fh.Close()
	ss, err := class.ReadCSV(opts.File, fh)
	if err != nil {
		return err
	}
	r, err := class.Import(ctx, cfg, opts.Class, opts.File, ss)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "imported %d students into class %s: %d students\n", len(ss), r.Name, len(r.Students))
	return nil
}

// ListOptions are `class list`'s inputs.
type ListOptions struct {
	F     *cmdutil.Factory
	Class string
	JSON  bool
}

func newCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{F: f}
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List the classes, or the students of one",
		Example: `  stemctl class list
  stemctl class list lab3
  stemctl class list lab3 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: cmdutil.RunEOptional(&opts.Class, opts, runF, runList),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// listRosters writes the classes' table (or JSON).
func listRosters(opts *ListOptions, cfg string, rosters []*class.Roster, more bool) error {
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if rosters == nil {
			rosters = []*class.Roster{}
		}
		return cmdutil.WriteJSON(out, rosters)
	}
	if len(rosters) == 0 {
		if !more {
			fmt.Fprintf(out, "no classes in %s: make one with `stemctl class init NAME`\n", class.Dir(cfg))
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tSTUDENTS\tFILE")
	for _, r := range rosters {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Name, len(r.Students), r.Path)
	}
	return tw.Flush()
}

func runList(_ context.Context, opts *ListOptions) error {
	cfg, err := configDir(opts.F)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.Class == "" {
		names, err := class.Classes(cfg)
		if err != nil {
			return err
		}
		// A damaged roster is reported, and the others are listed still.
		var rosters []*class.Roster
		var damaged []error
		for _, n := range names {
			r, err := class.Load(cfg, n)
			if err != nil {
				damaged = append(damaged, err)
				continue
			}
			rosters = append(rosters, r)
		}
		if err := listRosters(opts, cfg, rosters, len(damaged) > 0); err != nil {
			return err
		}
		for _, err := range damaged {
			fmt.Fprintf(opts.F.IOStreams.ErrOut, "stemctl: %s\n", termtext.String(err.Error()))
		}
		if len(damaged) > 0 {
			return &cmdutil.ExitError{Code: 1}
		}
		return nil
	}
	r, err := class.Load(cfg, opts.Class)
	if err != nil {
		return err
	}
	if opts.JSON {
		if r.Students == nil {
			r.Students = []class.Student{}
		}
		return cmdutil.WriteJSON(out, r)
	}
	key := r.Key
	if key == "" {
		key = "the only automation key in ~/.ssh"
	}
	fmt.Fprintf(out, "class %s (%s): %d students; key: %s\n", r.Name, r.Path, len(r.Students), key)
	if len(r.SSHOptions) > 0 {
		fmt.Fprintf(out, "ssh options: %s\n", strings.Join(r.SSHOptions, " "))
	}
	if len(r.Students) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STUDENT\tHOST\tKEY")
	for _, s := range r.Students {
		k := s.Key
		if k == "" {
			k = "(class)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Dest(), k)
	}
	return tw.Flush()
}

// RmOptions are `class rm`'s inputs.
type RmOptions struct {
	F       *cmdutil.Factory
	Class   string
	Student string
	Force   bool
}

func newCmdRm(f *cmdutil.Factory, runF func(context.Context, *RmOptions) error) *cobra.Command {
	opts := &RmOptions{F: f}
	cmd := &cobra.Command{
		Use:   "rm NAME [STUDENT]",
		Short: "Remove a student from a class, or an empty class",
		Long: `With STUDENT, remove that student's table from the roster (the rest of the
file stays as written). Without it, remove the class; a class that still has
students is removed only with --force.`,
		Example: `  stemctl class rm lab3 anna
  stemctl class rm lab3 --force`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Class = args[0]
			if len(args) == 2 {
				opts.Student = args[1]
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, runRm)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "remove a class that still has students")
	return cmd
}

func runRm(ctx context.Context, opts *RmOptions) error {
	cfg, err := configDir(opts.F)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.Student != "" {
		r, err := class.RemoveStudent(ctx, cfg, opts.Class, opts.Student)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "removed %s from class %s: %d students\n", opts.Student, r.Name, len(r.Students))
		return nil
	}
	r, err := class.Load(cfg, opts.Class)
	if err != nil {
		return err
	}
	if len(r.Students) > 0 && !opts.Force {
		return cmdutil.FlagErrorf("class %s still has %d students: remove them first, or pass --force to remove the class", r.Name, len(r.Students))
	}
	if err := class.RemoveClass(ctx, cfg, opts.Class); err != nil {
		return err
	}
	fmt.Fprintf(out, "removed class %s\n", opts.Class)
	return nil
}
