// Package proposals implements `stemctl proposals`: the student's list of
// the edits agents proposed, and the one place they are accepted or
// rejected (package proposals applies the decision from the host).
package proposals

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/termtext"
)

// Options are the inputs of every proposals command.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	ID       string
	Hunks    []int
	All      bool // list settled ones too
	Yes      bool
	JSON     bool
}

// NewCmdProposals builds the group; `stemctl proposals [INSTANCE]` lists.
func NewCmdProposals(f *cmdutil.Factory, runF func(context.Context, string, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	run := func(verb string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			switch {
			case verb == "list" && len(args) == 1:
				opts.Instance = args[0]
			case verb != "list":
				opts.ID = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), verb, opts)
			}
			switch verb {
			case "list":
				return List(cmd.Context(), opts)
			case "show":
				return Show(cmd.Context(), opts)
			}
			return Decide(cmd.Context(), opts, verb == "accept")
		}
	}
	cmd := &cobra.Command{
		Use:   "proposals [INSTANCE]",
		Short: "List, show, accept or reject the edits agents proposed",
		Long: `Under a task whose agent policy is edits = "propose", an agent's edit is not
made: it is proposed. The student sees it in Neovim as a diff, and decides here,
on the host: accept applies the change from the host (into the Neovim buffer when
the file is open there, keeping its signs and breakpoints, else into the saved
file), records it in the audit log and in blame as the agent's lines accepted by
the student at this terminal, and tells the editor to stop showing it.

Nothing in the container can accept a proposal: :StemAccept in Neovim only asks
(it names the command to run here). accept and reject show the change and ask
[y/N] on this terminal; without a terminal they refuse unless --yes is given.
Proposals are kept on the host after the proposing agent's session ends.`,
		Example: `  stemctl proposals
  stemctl proposals show p1
  stemctl proposals accept p1
  stemctl proposals accept p3 --hunk 2
  stemctl proposals reject p2 --instance native-amd64-demo-hello-t1`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE:              run("list"),
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "list decided proposals too")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	sub := func(use, short, example string) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Example: example, Args: cmdutil.ExactArgs(1, "ID (p1, p2, ...)"), RunE: run(strings.Fields(use)[0])}
		c.Flags().StringVarP(&opts.Instance, "instance", "i", "", "the instance the proposal was made in (needed when several have one of that id)")
		return c
	}
	show := sub("show ID", "Show a proposal as a diff", "  stemctl proposals show p1\n  stemctl proposals show p1 --json")
	accept := sub("accept ID", "Accept a proposal (or --hunk N of it): the host applies it", "  stemctl proposals accept p1\n  stemctl proposals accept p3 --hunk 2 --hunk 3")
	reject := sub("reject ID", "Reject a proposal (or --hunk N of it)", "  stemctl proposals reject p2\n  stemctl proposals reject p3 --hunk 1")
	for _, c := range []*cobra.Command{accept, reject} {
		c.Flags().IntSliceVar(&opts.Hunks, "hunk", nil, "decide only hunk N (repeatable)")
		c.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask (needed without a terminal)")
	}
	cmdutil.AddJSONFlag(show, &opts.JSON)
	cmd.AddCommand(show, accept, reject)
	return cmd
}

// item is one proposal with its instance's record.
type item struct {
	inst registry.Record
	rec  *proposals.Record
}

func stores(ctx context.Context, opts *Options) ([]registry.Record, string, error) {
	dirs, err := opts.F.Dirs()
	if err != nil {
		return nil, "", err
	}
	reg, err := opts.F.Registry()
	if err != nil {
		return nil, "", err
	}
	if opts.Instance != "" {
		r, err := reg.Find(ctx, opts.Instance)
		if err != nil {
			return nil, "", err
		}
		return []registry.Record{r}, dirs.State, nil
	}
	all, err := reg.List(ctx)
	return all, dirs.State, err
}

func collect(ctx context.Context, opts *Options) ([]item, string, error) {
	insts, state, err := stores(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	var out []item
	for _, in := range insts {
		rs, err := proposals.Open(state, in.Instance).List()
		if err != nil {
			return nil, "", err
		}
		for _, r := range rs {
			out = append(out, item{in, r})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rec.Created.Before(out[j].rec.Created) })
	return out, state, nil
}

// find is the proposal opts.ID names.
func find(ctx context.Context, opts *Options) (item, string, error) {
	all, state, err := collect(ctx, opts)
	if err != nil {
		return item{}, "", err
	}
	var hits []item
	for _, it := range all {
		if it.rec.ID == opts.ID || (len(opts.ID) >= 8 && strings.HasPrefix(it.rec.Key, opts.ID)) {
			hits = append(hits, it)
		}
	}
	// A restarted editor numbers from p1 again: the pending one, else the newest.
	var pending []item
	for _, it := range hits {
		if it.rec.State == proposals.Pending {
			pending = append(pending, it)
		}
	}
	// Several instances' editors have a pending one of that id: without
	// --instance, the task directory this runs in picks one.
	if len(pending) > 1 && opts.Instance == "" {
		if here, err := cmdutil.InstanceHere(ctx, opts.F, ""); err == nil {
			mine := slices.DeleteFunc(slices.Clone(pending), func(it item) bool { return it.inst.Instance != here })
			if len(mine) == 1 {
				pending = mine
			}
		}
	}
	switch {
	case len(pending) == 1:
		return pending[0], state, nil
	case len(pending) > 1:
		var names []string
		for _, it := range pending {
			names = append(names, it.inst.Instance+" "+it.rec.Key[:8])
		}
		return item{}, "", cmdutil.FlagErrorf("%d pending proposals are called %s (%s): give --instance, or the key's first 8 digits instead of the id", len(pending), termtext.Line(opts.ID, 20), strings.Join(names, ", "))
	case len(hits) > 0:
		return hits[len(hits)-1], state, nil
	}
	return item{}, "", fmt.Errorf("no proposal %q: `stemctl proposals --all` lists them", termtext.Line(opts.ID, 20))
}

// List lists the proposals.
func List(ctx context.Context, opts *Options) error {
	all, _, err := collect(ctx, opts)
	if err != nil {
		return err
	}
	var shown []item
	for _, it := range all {
		if opts.All || it.rec.State == proposals.Pending {
			shown = append(shown, it)
		}
	}
	w := opts.F.IOStreams.Out
	if opts.JSON {
		recs := make([]jsonProposal, 0, len(shown))
		for _, it := range shown {
			recs = append(recs, toJSON(it.rec))
		}
		return cmdutil.WriteJSON(w, recs)
	}
	if len(shown) == 0 {
		fmt.Fprintln(w, "no pending proposals")
		return nil
	}
	for _, it := range shown {
		r := it.rec
		fmt.Fprintf(w, "%-5s %-18s %s  %s  by %s  %d hunk(s)  %s\n", r.ID, r.State, termtext.Line(it.inst.Instance, 80),
			termtext.Line(r.Path, 120), termtext.Line(r.From, 60), len(r.Hunks), r.Created.Local().Format("2006-01-02 15:04"))
	}
	fmt.Fprintln(w, "\nstemctl proposals show ID; accept ID [--hunk N]; reject ID")
	return nil
}

type jsonProposal struct {
	ID       string              `json:"id"`
	Key      string              `json:"key"`
	Instance string              `json:"instance"`
	Path     string              `json:"path"`
	From     string              `json:"from"`
	State    string              `json:"state"`
	Created  string              `json:"created"`
	Hunks    []jsonHun           `json:"hunks"`
	Decided  *proposals.Decision `json:"decided,omitempty"`
}

type jsonHun struct {
	Line  int    `json:"line"`
	Old   int    `json:"old_lines"`
	New   int    `json:"new_lines"`
	State string `json:"state"`
	At    int    `json:"at,omitempty"`
}

func toJSON(r *proposals.Record) jsonProposal {
	j := jsonProposal{ID: r.ID, Key: r.Key, Instance: r.Instance, Path: r.Path, From: r.From, State: r.State,
		Created: r.Created.Format("2006-01-02T15:04:05Z07:00"), Decided: r.Decided}
	for _, h := range r.Hunks {
		j.Hunks = append(j.Hunks, jsonHun{Line: h.Start, Old: len(h.Old), New: len(h.New), State: h.State, At: h.At})
	}
	return j
}

// Show prints a proposal as a diff.
func Show(ctx context.Context, opts *Options) error {
	it, _, err := find(ctx, opts)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, toJSON(it.rec))
	}
	printDiff(opts.F.IOStreams.Out, it, nil)
	return nil
}

// maxShownLines bounds the lines of one hunk printed.
const maxShownLines = 200

// printDiff prints the hunks (only those in pick, when given).
func printDiff(w io.Writer, it item, pick []int) {
	r := it.rec
	fmt.Fprintf(w, "proposal %s (%s) in %s: %s, by %s\n", r.ID, r.State, termtext.Line(it.inst.Instance, 80), termtext.Line(r.Path, 200), termtext.Line(r.From, 60))
	for i, h := range r.Hunks {
		if len(pick) > 0 && !containsInt(pick, i+1) {
			continue
		}
		fmt.Fprintf(w, "@@ hunk %d of %d, line %d (%s) @@\n", i+1, len(r.Hunks), h.Start, h.State)
		if len(h.Old) == 0 {
			fmt.Fprintf(w, "  %s\n", showLine(h.Ctx))
		}
		lines := func(mark string, ls []string) {
			for n, l := range ls {
				if n == maxShownLines {
					fmt.Fprintf(w, "%s … %d more lines\n", mark, len(ls)-n)
					break
				}
				fmt.Fprintf(w, "%s%s\n", mark, showLine(l))
			}
		}
		lines("-", h.Old)
		lines("+", h.New)
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// showLine is a line of container or agent text for a terminal: no
// escape sequences or controls, on its line.
func showLine(s string) string {
	return strings.ReplaceAll(termtext.String(s), "\n", " ")
}
