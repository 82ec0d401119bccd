// Package policy implements `stemctl policy`: the agent policy floor of an
// instance, and loosening it on purpose, on the host.
package policy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// Options are policy's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Loosen   bool
	Yes      bool
	JSON     bool
	// Terminal reports whether the answer comes from a terminal (nil:
	// whether stdin is one); By names that input (empty: consent.By).
	Terminal func() bool
	By       string
}

// NewCmdPolicy builds the command.
func NewCmdPolicy(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "policy [INSTANCE]",
		Short: "Show an instance's agent policy floor, or loosen it to the card's current policy",
		Long: `Show the agent policy in force for an instance: the floor recorded when the
instance was first made, the policy its card's stem.toml says now, and what
agents get (the stricter of the two in every part).

The card can be rewritten from inside the container, so a looser stem.toml
never loosens the policy by itself: not when the container is started again,
not when it is re-created, not when an agent is started. --loosen makes the
card's current policy the new floor after showing the change and asking on
this terminal; without a terminal it refuses unless --yes is given. ` + "`stemctl rm`" + `
followed by ` + "`stemctl up`" + ` also starts from the card's policy. A tighter
stem.toml takes effect at once, without either.

The task's editable globs (the files an assist agent may edit) are recorded
and loosened the same way: a file counts as editable when both the recorded
globs and the card's current ones name it.

Without INSTANCE, in a task's directory of the card, the instance of that task.`,
		Example: `  stemctl policy native-amd64-demo-hello-t1
  stemctl policy native-amd64-demo-hello-t1 --loosen
  stemctl policy native-amd64-demo-hello-t1 --loosen --yes --json`,
		Args:              cmdutil.OptionalInstance("INSTANCE"),
		ValidArgsFunction: cmdutil.CompleteInstance(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Instance = args[0]
			}
			if opts.Yes && !opts.Loosen {
				return cmdutil.FlagErrorf("--yes answers --loosen's question; give --loosen too")
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().BoolVar(&opts.Loosen, "loosen", false, "make the card's current policy the floor (asks first)")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "with --loosen: do not ask (the audit log records it)")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Report is what --json prints.
type Report struct {
	Instance string              `json:"instance"`
	Floor    *agentpolicy.Policy `json:"floor"`
	Card     *agentpolicy.Policy `json:"card"`
	CardErr  string              `json:"card_error,omitempty"`
	InForce  agentpolicy.Policy  `json:"in_force"`
	// The editable globs recorded on the host, and the card's now: a file
	// is editable by the manifest when both name it.
	EditableFloor *[]string `json:"editable_floor"`
	EditableCard  []string  `json:"editable_card"`
	Loosened      bool      `json:"loosened,omitempty"`
}

// Run shows the policy, or loosens its floor.
func Run(ctx context.Context, opts *Options) error {
	rec, err := cmdutil.FindInstance(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	st, err := cmdutil.Consents(opts.F)
	if err != nil {
		return err
	}
	e, err := st.Get(ctx, rec.Instance)
	if err != nil {
		return err
	}
	rep := Report{Instance: rec.Instance, Floor: e.Floor, EditableFloor: e.EditableFloor}
	if rep.Floor == nil {
		rep.Floor = rec.Policy // recorded by a stem before floors
	}
	card, globs, cerr := cardPolicy(rec)
	if cerr == nil {
		rep.Card, rep.EditableCard = &card, globs
	} else {
		rep.CardErr = cerr.Error()
	}
	rep.InForce = inForce(rep.Floor, rep.Card)
	if opts.Loosen {
		if cerr != nil {
			return fmt.Errorf("cannot loosen the policy of %s: %w", rec.Instance, cerr)
		}
		done, err := loosen(ctx, opts, st, rec, rep)
		if err != nil {
			return err
		}
		if done {
			g := append([]string{}, globs...)
			rep.Floor, rep.EditableFloor, rep.Loosened, rep.InForce = &card, &g, true, card
		}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, rep)
	}
	out := opts.F.IOStreams.Out
	fmt.Fprintf(out, "floor:    %s\n", describe(rep.Floor))
	if rep.Card != nil {
		fmt.Fprintf(out, "card:     %s\n", describe(rep.Card))
	} else {
		fmt.Fprintf(out, "card:     cannot be read (%s)\n", rep.CardErr)
	}
	fmt.Fprintf(out, "in force: %s\n", describe(&rep.InForce))
	fmt.Fprintf(out, "editable: %s (recorded on the host)\n", describeGlobs(rep.EditableFloor))
	if rep.Card != nil && !sameGlobs(rep.EditableFloor, rep.EditableCard) {
		fmt.Fprintf(out, "          %s (the card's now; a file is editable when both name it)\n", describeGlobs(&rep.EditableCard))
	}
	if !opts.Loosen && rep.Card != nil && (rep.Floor != nil && agentpolicy.Meet(*rep.Floor, card).String() != card.String() || !sameGlobs(rep.EditableFloor, rep.EditableCard)) {
		fmt.Fprintf(out, "The card differs from the floor; `stemctl policy %s --loosen` makes it the floor.\n", rec.Instance)
	}
	return nil
}

// inForce is what stem-mcp works under: the card met with the floor; an
// unreadable card leaves the floor, and no floor and no card observe.
func inForce(floor, card *agentpolicy.Policy) agentpolicy.Policy {
	switch {
	case floor != nil && card != nil:
		return agentpolicy.Meet(*floor, *card)
	case floor != nil:
		return *floor
	case card != nil:
		return *card
	}
	return agentpolicy.Policy{MaxLevel: agentpolicy.CapObserve, Edits: agentpolicy.EditsNone}
}

// loosen asks, then records card as the floor and as the registry's
// policy (what stem-mcp and agent start meet the card with).
func loosen(ctx context.Context, opts *Options, st *consent.Store, rec registry.Record, rep Report) (bool, error) {
	reg, err := opts.F.Registry()
	if err != nil {
		return false, err
	}
	card := *rep.Card
	ios := opts.F.IOStreams
	if rep.Floor != nil && rep.Floor.String() == card.String() && sameGlobs(rep.EditableFloor, rep.EditableCard) {
		fmt.Fprintf(ios.ErrOut, "%s: the floor is already the card's policy; nothing to change\n", rec.Instance)
		return false, nil
	}
	terminal := ios.IsStdinTTY()
	if opts.Terminal != nil {
		terminal = opts.Terminal()
	}
	by := opts.By
	if by == "" {
		by = consent.By("stemctl policy --loosen", ios.In)
		if opts.Yes {
			by = consent.By("stemctl policy --loosen --yes", ios.In)
		}
	}
	fmt.Fprintf(ios.ErrOut, "Agent policy of %s:\n  from %s\n  to   %s\n", rec.Instance, describe(rep.Floor), describe(&card))
	if !sameGlobs(rep.EditableFloor, rep.EditableCard) {
		fmt.Fprintf(ios.ErrOut, "Editable files:\n  from %s\n  to   %s\n", describeGlobs(rep.EditableFloor), describeGlobs(&rep.EditableCard))
	}
	if !opts.Yes {
		if !terminal {
			return false, fmt.Errorf("not loosened: stemctl asks on a terminal before loosening the agent policy; run it on one, or give --yes")
		}
		fmt.Fprint(ios.ErrOut, "Loosen it? [y/N] ")
		if !yes(ios.In) {
			fmt.Fprintln(ios.ErrOut, "not loosened")
			return false, nil
		}
	}
	if err := st.Loosen(ctx, rec.Instance, card, rep.EditableCard, by); err != nil {
		return false, err
	}
	err = reg.Update(ctx, func(m map[string]registry.Record) error {
		r, ok := m[rec.Instance]
		if !ok {
			return fmt.Errorf("%w: %s", registry.ErrNotFound, rec.Instance)
		}
		r.Policy = &card
		m[rec.Instance] = r
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("the floor of %s was loosened, but its record was not (the next `stemctl up` records it): %w", rec.Instance, err)
	}
	log, err := opts.F.Audit()
	if err == nil {
		_, err = log.Append(ctx, audit.Entry{Event: audit.PolicyFloor, Account: cmdutil.LocalAccount(), Instance: rec.Instance, ContainerID: rec.ContainerID,
			Result: "ok", Detail: fmt.Sprintf("loosen from %s to %s; editable from %s to %s; by %s", describe(rep.Floor), describe(&card), describeGlobs(rep.EditableFloor), describeGlobs(&rep.EditableCard), by)})
	}
	if err != nil {
		return true, fmt.Errorf("the policy of %s was loosened, but not written to the audit log: %w", rec.Instance, err)
	}
	return true, nil
}

// yes reads one line and reports whether it says yes.
func yes(in io.Reader) bool {
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// cardPolicy is the task's policy and editable globs in the card's
// stem.toml now.
func cardPolicy(rec registry.Record) (agentpolicy.Policy, []string, error) {
	m, err := workspace.LoadManifest(rec.CardPath)
	if err != nil {
		return agentpolicy.Policy{}, nil, err
	}
	t, ok := m.Task(rec.Task)
	if !ok {
		return agentpolicy.Policy{}, nil, fmt.Errorf("task %s is no longer in the card's manifest", rec.Task)
	}
	return m.AgentPolicy(t), append([]string{}, t.Editable...), nil
}

func describeGlobs(g *[]string) string {
	switch {
	case g == nil:
		return "none recorded"
	case len(*g) == 0:
		return "none"
	}
	return strings.Join(*g, " ")
}

func sameGlobs(floor *[]string, card []string) bool {
	return floor != nil && slices.Equal(*floor, card)
}

func describe(p *agentpolicy.Policy) string {
	if p == nil {
		return "none recorded"
	}
	return p.String()
}
