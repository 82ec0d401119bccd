package class

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/sessionevent"
	"github.com/stem-edu/stem/internal/sshtarget"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// StatusOptions are `class status`'s inputs.
type StatusOptions struct {
	F        *cmdutil.Factory
	Class    string
	JSON     bool
	Watch    bool
	Every    time.Duration
	Timeout  time.Duration
	Parallel int
}

// NewCmdStatus builds `class status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{F: f}
	cmd := &cobra.Command{
		Use:   "status [NAME] [--json] [--watch]",
		Short: "Ask every student's gate at once: reachable, grant, instances, who needs help",
		Long: `Run the gate's status verb (what "stemctl teacher status" does) for every
student of the class at once, each within --timeout, and print one row per
student: whether the gate answered (and if not, why: host key unknown, refused,
key refused or grant revoked, timeout, broken answer, with what to do), the
grant's level, and each allowed instance's task, profile and state (answers:
tmux and Neovim answer; no tmux, no nvim, down; not started). FLAGS says who
may need help: instance-down, crashed, unreachable, broken, failing,
no-access, setup, unsafe-key, idle, not-started, no-instance. IDLE is how long
the student's tmux has had no output and their terminal no key (idle: ten
minutes); AGENTS the agents running in the instance.

A student who does not answer shows as such when their --timeout runs out and
never delays the others; an answer that is not the gate's status, or goes on
past 256 KiB, marks that student broken. The table lists the students who
need help first (--json keeps the roster's order); --watch redraws it in place
every --every until Ctrl-C. --watch keeps one session open with each student
(no new SSH connection per round) and so also sees their session events: LAST
BUILD and LAST EVENT (a crash, a gdb stop), and the flags crashed (within ten
minutes) and failing (three failed builds or tests within ten minutes). NAME
may be left out when there is one class.`,
		Example: `  stemctl class status lab3
  stemctl class status lab3 --json
  stemctl class status lab3 --watch --every 10s --timeout 5s`,
		Args: cobra.MaximumNArgs(1),
		RunE: cmdutil.RunEOptional(&opts.Class, opts, runF, RunStatus),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	cmd.Flags().BoolVar(&opts.Watch, "watch", false, "redraw the table in place until interrupted, who needs help first")
	cmd.Flags().DurationVar(&opts.Every, "every", 5*time.Second, "with --watch, ask again this long after the last answer")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", class.DefaultTimeout, "give up on one student after this long")
	cmd.Flags().IntVar(&opts.Parallel, "parallel", class.DefaultParallel, "ask at most this many students at once")
	return cmd
}

// RunStatus prints the class's status once, or redraws it with --watch.
func RunStatus(ctx context.Context, opts *StatusOptions) error {
	if opts.Watch && opts.JSON {
		return cmdutil.FlagErrorf("--watch draws for a terminal; --json prints the status once")
	}
	if opts.Every <= 0 {
		return cmdutil.FlagErrorf("--every must be positive")
	}
	r, err := loadClass(opts.F, opts.Class)
	if err != nil {
		return err
	}
	sopt := class.Options{Resolve: resolver(opts.F, r), Timeout: opts.Timeout, Parallel: opts.Parallel}
	ios := opts.F.IOStreams
	notes := &noteSet{seen: map[string]bool{}}
	if !opts.Watch {
		rows := class.Status(ctx, r.Students, sopt)
		notes.print(ios.ErrOut, rows)
		if opts.JSON {
			return cmdutil.WriteJSON(ios.Out, rows)
		}
		class.SortByNeed(rows)
		return render(ios.Out, rows, time.Now())
	}
	// --watch keeps a session open with each student's gate (as stem-mcp
	// class does): each round asks over it, with no new SSH handshake, and
	// the students' session events fill LAST BUILD and LAST EVENT.
	hub := class.NewHub(r.Students, class.HubOptions{Options: sopt})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	defer func() { cancel(); waitBounded(done) }()
	for {
		start := time.Now()
		rows := hub.Overview(ctx)
		if ctx.Err() != nil {
			return nil
		}
		class.SortByNeed(rows)
		var b bytes.Buffer
		if ios.IsStdoutTTY() {
			b.WriteString("\x1b[H\x1b[2J") // home, clear: the table is redrawn in place
		}
		need := 0
		for _, row := range rows {
			if row.Need() > 0 {
				need++
			}
		}
		fmt.Fprintf(&b, "class %s  %s  %d of %d may need help  (asked in %.1fs; Ctrl-C ends)\n\n",
			r.Name, time.Now().Format("15:04:05"), need, len(rows), time.Since(start).Seconds())
		render(&b, rows, time.Now())
		if !ios.IsStdoutTTY() {
			b.WriteString("\n")
		}
		if _, err := ios.Out.Write(b.Bytes()); err != nil {
			return err
		}
		notes.print(ios.ErrOut, rows)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Every):
		}
	}
}

// loadClass loads the class name, or the only class there is, and
// refuses one with no students: there is nobody to watch.
func loadClass(f *cmdutil.Factory, name string) (*class.Roster, error) {
	cfg, err := configDir(f)
	if err != nil {
		return nil, err
	}
	if name == "" {
		names, err := class.Classes(cfg)
		if err != nil {
			return nil, err
		}
		switch len(names) {
		case 1:
			name = names[0]
		case 0:
			return nil, cmdutil.FlagErrorf("there is no class yet: make one with `stemctl class init NAME`")
		default:
			return nil, cmdutil.FlagErrorf("which class? %s", strings.Join(names, ", "))
		}
	}
	r, err := class.Load(cfg, name)
	if err != nil {
		return nil, err
	}
	if len(r.Students) == 0 {
		return nil, fmt.Errorf("class %s has no students: add them with `stemctl class add %s USER@HOST` or `stemctl class import %s FILE.csv`", r.Name, r.Name, r.Name)
	}
	return r, nil
}

// resolver reaches each student as `stemctl teacher status` would, with
// the student's key, else the class's, else the only automation key.
func resolver(f *cmdutil.Factory, r *class.Roster) func(context.Context, class.Student) (teacherkey.Target, []string, error) {
	return func(ctx context.Context, s class.Student) (teacherkey.Target, []string, error) {
		d, err := f.Dirs()
		if err != nil {
			return teacherkey.Target{}, nil, err
		}
		return sshtarget.Resolve(ctx, sshtarget.Request{Host: s.Host, Key: r.KeyFor(s, d.Home), Port: s.Port, SSHOptions: r.SSHOptions, Home: d.Home, Self: f.Self})
	}
}

// noteSet prints each distinct note once (thirty students share a key).
type noteSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *noteSet) print(w io.Writer, rows []class.Row) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range rows {
		for _, note := range r.Notes {
			if !n.seen[note] {
				n.seen[note] = true
				fmt.Fprintln(w, note)
			}
		}
	}
}

// render prints the table: one line per instance (a student without one
// gets one line), then why and what to do for each student not reached.
// IDLE and AGENTS are per instance; LAST BUILD and LAST EVENT per student
// (only a hub, under --watch, sees events).
func render(w io.Writer, rows []class.Row, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STUDENT\tHOST\tREACH\tLEVEL\tTASK\tPROFILE\tSTATE\tIDLE\tAGENTS\tLAST BUILD\tLAST EVENT\tFLAGS")
	for _, r := range rows {
		flags := "-"
		if len(r.Flags) > 0 {
			fs := make([]string, len(r.Flags))
			for i, f := range r.Flags {
				fs[i] = string(f)
			}
			flags = strings.Join(fs, ",")
		}
		build, last := "-", "-"
		if r.Work != nil {
			build, last = outcome(r.Work.LastBuild, now), outcome(r.Work.LastEvent, now)
		}
		if len(r.Instances) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t%s\t%s\t%s\n", r.Student, r.Dest, r.Reach, dash(r.Level), build, last, flags)
			continue
		}
		for i, in := range r.Instances {
			// Every line starts with the student's own name, and a student
			// gets at most maxTableInstances lines: a task name cannot pass
			// for another student's row.
			if i == maxTableInstances {
				fmt.Fprintf(tw, "%s\t\t\t\t(%d more instances: --json lists them)\t\t\t\t\t\t\t\n", r.Student, len(r.Instances)-i)
				break
			}
			task := in.Instance
			if in.Series != "" && in.Card != "" && in.Task != "" {
				task = in.Series + "/" + in.Card + "/" + in.Task
			}
			idle := "-"
			if in.Activity != nil {
				idle = ago(now.Sub(*in.Activity))
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Student, r.Dest, r.Reach, dash(r.Level),
					task, dash(in.Profile), in.State, idle, agents(in.Agents), build, last, flags)
			} else {
				fmt.Fprintf(tw, "%s\t\t\t\t%s\t%s\t%s\t%s\t%s\t\t\t\n", r.Student, task, dash(in.Profile), in.State, idle, agents(in.Agents))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Why == "" {
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", r.Student, r.Why)
		if r.Fix != "" {
			fmt.Fprintf(w, "  %s\n", r.Fix)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago is a duration as the table shows it: 45s, 12m, 2h05m.
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// agents is "claude/assist,codex/observe" (a ! marks one with a problem).
func agents(as []class.Agent) string {
	if len(as) == 0 {
		return "-"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Provider + "/" + a.Level
		if a.Problem != "" {
			parts[i] += "!"
		}
	}
	return strings.Join(parts, ",")
}

// outcome is an event in a few words: "build failed 3m ago",
// "crashed SIGSEGV 40s ago", "gdb stop 2m ago".
func outcome(o *class.Outcome, now time.Time) string {
	if o == nil {
		return "-"
	}
	var what string
	switch o.Type {
	case sessionevent.BuildFailed, sessionevent.TestFailed:
		what = o.Action + " failed"
		if o.Action == "" {
			what = strings.TrimSuffix(o.Type, "_failed") + " failed"
		}
	case sessionevent.ProgramCrashed:
		what = "crashed " + o.Signal
	case sessionevent.GDBStopped:
		what = "gdb stop"
	case sessionevent.ProgramExited:
		switch {
		case o.Action != "" && o.OK():
			what = o.Action + " ok"
		case o.ExitCode != nil:
			what = fmt.Sprintf("exited %d", *o.ExitCode)
		default:
			what = "exited"
		}
	default:
		what = strings.ReplaceAll(o.Type, "_", " ")
	}
	return what + " " + ago(now.Sub(o.Time)) + " ago"
}

// maxTableInstances bounds the table's lines for one student.
const maxTableInstances = 8

// shutdownWait bounds how long an ending command waits for its hub.
const shutdownWait = 2 * time.Second

// waitBounded waits for done, at most shutdownWait.
func waitBounded(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(shutdownWait):
	}
}
