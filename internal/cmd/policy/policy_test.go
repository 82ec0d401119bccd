package policy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmd/policy"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

var floor = agentpolicy.Policy{MaxLevel: agentpolicy.CapAssist, Edits: agentpolicy.EditsPropose, Approve: []string{"task_action"}}

type world struct {
	f        *cmdutil.Factory
	in, out  *bytes.Buffer
	state    string
	reg      *registry.Registry
	terminal bool
}

// newWorld: an instance whose floor is assist/propose and whose card (as
// code in the container rewrote it) now sets no policy at all.
func newWorld(t *testing.T) *world {
	t.Helper()
	state, card := t.TempDir(), t.TempDir()
	src := filepath.Join(testenv.RepoRoot(), "examples", "workspace", "demo", "hello", workspace.ManifestName)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(card, workspace.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	reg, _ := registry.Open(state)
	ctx := context.Background()
	if err := reg.Put(ctx, registry.Record{Instance: "i1", ContainerID: "c1", CardPath: card, Task: "1", Policy: &floor}); err != nil {
		t.Fatal(err)
	}
	st, _ := consent.Open(state)
	if _, err := st.Settle(ctx, "i1", "c1", nil, floor, []string{"t1/words.c"}, "test"); err != nil {
		t.Fatal(err)
	}
	ios, in, out, _ := iostreams.Test()
	w := &world{in: in, out: out, state: state, reg: reg}
	w.f = &cmdutil.Factory{
		IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil },
		Registry:  func() (*registry.Registry, error) { return reg, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(state) },
	}
	return w
}

func (w *world) run(t *testing.T, args ...string) error {
	t.Helper()
	cmd := policy.NewCmdPolicy(w.f, func(ctx context.Context, o *policy.Options) error {
		o.Terminal = func() bool { return w.terminal }
		o.By = "stemctl policy --loosen on /dev/pts/5"
		return policy.Run(ctx, o)
	})
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.Execute()
}

func (w *world) recorded(t *testing.T) (agentpolicy.Policy, agentpolicy.Policy) {
	t.Helper()
	rec, err := w.reg.Get(context.Background(), "i1")
	if err != nil || rec.Policy == nil {
		t.Fatalf("record %+v %v", rec, err)
	}
	st, _ := consent.Open(w.state)
	e, err := st.Get(context.Background(), "i1")
	if err != nil || e.Floor == nil {
		t.Fatalf("floor %+v %v", e, err)
	}
	return *rec.Policy, *e.Floor
}

// TestLoosenAsksOnATerminal: the floor moves only after a yes typed on a
// terminal, or --yes; every refusal leaves record and floor as they were.
func TestLoosenAsksOnATerminal(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.run(t, "i1"); err != nil {
		t.Fatal(err)
	}
	if s := w.out.String(); !strings.Contains(s, "floor:    max_level=assist") || !strings.Contains(s, "card:     max_level=full") || !strings.Contains(s, "in force: max_level=assist") || !strings.Contains(s, "--loosen") {
		t.Fatalf("show:\n%s", s)
	}
	if err := w.run(t, "i1", "--loosen"); err == nil || !strings.Contains(err.Error(), "give --yes") {
		t.Fatalf("without a terminal: %v", err)
	}
	w.terminal = true
	w.in.WriteString("n\n")
	if err := w.run(t, "i1", "--loosen"); err != nil {
		t.Fatal(err)
	}
	w.in.WriteString("\n")
	if err := w.run(t, "i1", "--loosen"); err != nil {
		t.Fatal(err)
	}
	if rec, fl := w.recorded(t); rec.MaxLevel != agentpolicy.CapAssist || fl.MaxLevel != agentpolicy.CapAssist {
		t.Fatalf("a no loosened it: %+v %+v", rec, fl)
	}
	w.in.WriteString("y\n")
	if err := w.run(t, "i1", "--loosen"); err != nil {
		t.Fatal(err)
	}
	if rec, fl := w.recorded(t); !rec.IsDefault() || !fl.IsDefault() {
		t.Fatalf("a yes did not loosen: %+v %+v", rec, fl)
	}
	log, _ := audit.Open(w.state)
	ents, _ := log.Read(audit.Filter{})
	var got []string
	for _, e := range ents {
		if e.Event == audit.PolicyFloor {
			got = append(got, e.Detail)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "from max_level=assist") || !strings.Contains(got[0], "to max_level=full") || !strings.Contains(got[0], "/dev/pts/5") {
		t.Fatalf("audit %q", got)
	}
}

// TestLoosenYesWithoutTerminal: --yes is the one way without a terminal.
func TestLoosenYesWithoutTerminal(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.run(t, "i1", "--yes"); err == nil || !cmdutil.IsFlagError(err) {
		t.Fatalf("--yes alone: %v", err)
	}
	if err := w.run(t, "i1", "--loosen", "--yes", "--json"); err != nil {
		t.Fatal(err)
	}
	if rec, fl := w.recorded(t); !rec.IsDefault() || !fl.IsDefault() || !strings.Contains(w.out.String(), `"loosened": true`) {
		t.Fatalf("%+v %+v\n%s", rec, fl, w.out.String())
	}
}

// TestLoosenTakesTheCardsEditableGlobs: globs the card added since the
// instance was made are shown as a difference and become the editable
// floor only with the loosening.
func TestLoosenTakesTheCardsEditableGlobs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.run(t, "i1"); err != nil {
		t.Fatal(err)
	}
	s := w.out.String()
	if !strings.Contains(s, "editable: t1/words.c (recorded on the host)") || !strings.Contains(s, "t1/test_words.c (the card's now") {
		t.Fatalf("show:\n%s", s)
	}
	st, _ := consent.Open(w.state)
	if e, _ := st.Get(context.Background(), "i1"); len(e.FloorEditable()) != 1 {
		t.Fatalf("showing changed the editable floor: %q", e.FloorEditable())
	}
	if err := w.run(t, "i1", "--loosen", "--yes"); err != nil {
		t.Fatal(err)
	}
	e, _ := st.Get(context.Background(), "i1")
	if got := strings.Join(e.FloorEditable(), " "); got != "t1/words.c t1/test_words.c" {
		t.Fatalf("after --loosen the editable floor is %q", got)
	}
}
