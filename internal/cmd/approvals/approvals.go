// Package approvals implements `stemctl approvals`: the student's answers,
// on the host, to the requests agents and the teacher make under the
// task's agent policy (the questions `stemctl attach` shows below the
// session). It reads and answers internal/decision's host directory, which
// no container can reach.
package approvals

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/termtext"
)

// Options are approvals' inputs.
type Options struct {
	F        *cmdutil.Factory
	Verb     string // "", "allow", "deny", "watch"
	Instance string // watch: one instance (all when empty)
	ID       string // allow/deny: the question's id or an unambiguous prefix
	While    bool   // allow: every request of that client for a while
	JSON     bool
}

// NewCmdApprovals builds the command and its subcommands.
func NewCmdApprovals(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	run := func(cmd *cobra.Command, opts *Options) error {
		return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
	}
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and answer agents' requests that wait for your yes",
		Long: `When the task's agent policy lists a tool in approve, a call of it waits for
your answer. The question shows in the line below the session in
` + "`stemctl attach`" + ` (answer there with Ctrl-] then y, n or a); this command lists
the open questions of every instance and answers them from any terminal on
the host. Nothing in the container can answer: the questions and answers
never pass through it.

A request is answered once. "allow --while" allows every request of that
agent (or teacher grant) for 10 minutes. ` + "`stemctl approvals watch`" + ` keeps a
terminal open that shows each question as it comes and reads your answer.`,
		Example: `  stemctl approvals
  stemctl approvals allow 3f9a1c
  stemctl approvals deny 3f9a1c
  stemctl approvals allow 3f9a1c --while
  stemctl approvals watch native-amd64-demo-hello-t1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd, opts) },
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)

	answer := func(verb, short string) *cobra.Command {
		o := &Options{F: f, Verb: verb}
		c := &cobra.Command{
			Use:     verb + " ID",
			Short:   short,
			Args:    cmdutil.ExactArgs(1, "ID"),
			Example: fmt.Sprintf(`  stemctl approvals %s 3f9a1c`, verb),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.ID = args[0]
				return run(cmd, o)
			},
		}
		if verb == "allow" {
			c.Flags().BoolVar(&o.While, "while", false, "allow every request of that agent or teacher for 10 minutes")
		}
		return c
	}
	watch := &Options{F: f, Verb: "watch"}
	watchCmd := &cobra.Command{
		Use:   "watch [INSTANCE]",
		Short: "Answer each request here as it comes (y, n, or a for a while)",
		Example: `  stemctl approvals watch
  stemctl approvals watch native-amd64-demo-hello-t1`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				watch.Instance = args[0]
			}
			return run(cmd, watch)
		},
	}
	cmd.AddCommand(answer("allow", "Allow one waiting request"), answer("deny", "Refuse one waiting request"), watchCmd)
	return cmd
}

// pending is one open question with its spool.
type pending struct {
	q     decision.Question
	spool *decision.Spool
}

// Run lists or answers.
func Run(ctx context.Context, opts *Options) error {
	dirs, err := opts.F.Dirs()
	if err != nil {
		return err
	}
	switch opts.Verb {
	case "watch":
		return runWatch(ctx, opts, dirs.State)
	case "allow", "deny":
		return runAnswer(opts, dirs.State)
	}
	ps, err := allPending(dirs.State)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		qs := make([]decision.Question, 0, len(ps))
		for _, p := range ps {
			qs = append(qs, p.q)
		}
		return cmdutil.WriteJSON(out, qs)
	}
	if len(ps) == 0 {
		fmt.Fprintln(opts.F.IOStreams.ErrOut, "no requests wait for your answer")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tINSTANCE\tEXPIRES\tREQUEST")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.q.ID[:8], p.q.Instance, time.Until(p.q.Expires).Round(time.Second), termtext.OneLine(p.q.Text, 120))
	}
	return tw.Flush()
}

// allPending is every instance's open questions, oldest first.
func allPending(state string) ([]pending, error) {
	ents, err := os.ReadDir(filepath.Join(state, "decisions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	var ps []pending
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sp, err := decision.Open(state, e.Name())
		if err != nil {
			continue
		}
		qs, err := sp.Pending()
		if err != nil {
			continue
		}
		for _, q := range qs {
			ps = append(ps, pending{q, sp})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].q.Asked.Before(ps[j].q.Asked) })
	return ps, nil
}

func runAnswer(opts *Options, state string) error {
	id := strings.ToLower(strings.TrimSpace(opts.ID))
	if len(id) < 4 {
		return cmdutil.FlagErrorf("give at least 4 characters of the request's id (see `stemctl approvals`)")
	}
	ps, err := allPending(state)
	if err != nil {
		return err
	}
	var match []pending
	for _, p := range ps {
		if strings.HasPrefix(p.q.ID, id) {
			match = append(match, p)
		}
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("no request %s waits for an answer (answered, expired or withdrawn; `stemctl approvals` lists the open ones)", opts.ID)
	case 1:
	default:
		return fmt.Errorf("%s names %d requests: give more of the id", opts.ID, len(match))
	}
	p := match[0]
	choice := decision.No
	if opts.Verb == "allow" {
		choice = decision.Yes
		if opts.While {
			choice = decision.While
		}
	}
	a := decision.Answer{ID: p.q.ID, Choice: choice, Input: "stemctl approvals on " + terminalName(opts.F.IOStreams.In)}
	if err := p.spool.Answer(a); err != nil {
		return fmt.Errorf("answer %s: %w", p.q.ID[:8], err)
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, a)
	}
	fmt.Fprintf(opts.F.IOStreams.Out, "%s: %s (%s)\n", p.q.ID[:8], describe(choice), termtext.OneLine(p.q.Text, 120))
	return nil
}

func describe(c decision.Choice) string {
	switch c {
	case decision.Yes:
		return "allowed once"
	case decision.While:
		return "allowed for 10 minutes"
	}
	return "refused"
}

// runWatch shows each question as it comes and reads the student's answer
// as a line from this terminal: y, n, or a (then a again to confirm).
func runWatch(ctx context.Context, opts *Options, state string) error {
	ios := opts.F.IOStreams
	input := "stemctl approvals watch on " + terminalName(ios.In)
	names, err := watchNames(ctx, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type update struct {
		instance string
		qs       []decision.Question
	}
	updates := make(chan update)
	spools := map[string]*decision.Spool{}
	for _, n := range names {
		sp, err := decision.Open(state, n)
		if err != nil {
			return err
		}
		release, err := sp.Attend(input)
		if err != nil {
			return err
		}
		defer release()
		spools[n] = sp
		go func() {
			for qs := range sp.Watch(ctx) {
				select {
				case updates <- update{n, qs}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(ios.In)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	fmt.Fprintf(ios.ErrOut, "watching %s for requests (Ctrl-C ends)\n", strings.Join(names, ", "))
	open := map[string][]decision.Question{}
	var current *decision.Question
	confirming := false
	next := func() {
		var all []decision.Question
		for _, qs := range open {
			all = append(all, qs...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Asked.Before(all[j].Asked) })
		if current != nil && slices.ContainsFunc(all, func(q decision.Question) bool { return q.ID == current.ID }) {
			return
		}
		current, confirming = nil, false
		if len(all) > 0 {
			current = &all[0]
			ask(ios.Out, *current)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			open[u.instance] = u.qs
			next()
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if current == nil {
				continue
			}
			l = strings.ToLower(strings.TrimSpace(l))
			var c decision.Choice
			switch {
			case confirming && l == "a":
				c = decision.While
			case confirming:
				confirming = false
				ask(ios.Out, *current)
				continue
			case l == "y" && current.Offers(decision.Yes):
				c = decision.Yes
			case l == "n":
				c = decision.No
			case l == "a" && current.Offers(decision.While):
				confirming = true
				fmt.Fprintf(ios.Out, "allow every request of %s for 10 minutes? a again to confirm, anything else goes back: ", termtext.OneLine(current.From, 40))
				continue
			default:
				ask(ios.Out, *current)
				continue
			}
			q := *current
			if err := spools[q.Instance].Answer(decision.Answer{ID: q.ID, Choice: c, Input: input}); err != nil {
				fmt.Fprintf(ios.ErrOut, "%s: %v\n", q.ID[:8], err)
			} else {
				fmt.Fprintf(ios.Out, "%s: %s\n", q.ID[:8], describe(c))
			}
			open[q.Instance] = slices.DeleteFunc(open[q.Instance], func(o decision.Question) bool { return o.ID == q.ID })
			current = nil
			next()
		}
	}
}

func watchNames(ctx context.Context, opts *Options) ([]string, error) {
	if opts.Instance != "" {
		return []string{opts.Instance}, nil
	}
	reg, err := opts.F.Registry()
	if err != nil {
		return nil, err
	}
	recs, err := reg.List(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Instance)
	}
	if len(names) == 0 {
		return nil, errors.New("no instances to watch: start one with `stemctl up PROFILE SERIES CARD TASK`")
	}
	return names, nil
}

func ask(w io.Writer, q decision.Question) {
	keys := "y: allow once  n: no"
	if q.Offers(decision.While) {
		keys += "  a: allow it all for 10 min"
	}
	fmt.Fprintf(w, "[%s] %s: %s\n  %s > ", q.ID[:8], q.Instance, termtext.OneLine(q.Text, 200), keys)
}

// terminalName names the terminal on r ("/dev/pts/3"), or says there is none.
func terminalName(r io.Reader) string {
	if f, ok := r.(*os.File); ok {
		if name, err := os.Readlink("/proc/self/fd/" + fmt.Sprint(f.Fd())); err == nil && strings.HasPrefix(name, "/dev/") {
			return name
		}
	}
	return "no terminal"
}
