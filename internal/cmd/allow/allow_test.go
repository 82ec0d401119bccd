package allow_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmd/allow"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/xdg"
)

type world struct {
	f     *cmdutil.Factory
	out   interface{ String() string }
	state string
	card  string
}

// newWorld is an account with one recorded instance and no Podman.
func newWorld(t *testing.T) *world {
	t.Helper()
	state, card := t.TempDir(), t.TempDir()
	reg, err := registry.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	rec := registry.Record{Instance: "i1", ContainerID: strings.Repeat("ab", 32), CardPath: card, Task: "1"}
	if err := reg.Put(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	ios, _, out, _ := iostreams.Test()
	return &world{state: state, card: card, out: out, f: &cmdutil.Factory{
		IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil },
		Registry:  func() (*registry.Registry, error) { return reg, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(state) },
	}}
}

func (w *world) run(t *testing.T, disallow bool, args ...string) error {
	t.Helper()
	cmd := allow.NewCmdAllow(w.f, func(ctx context.Context, o *allow.Options) error {
		o.By = "stemctl allow on /dev/pts/7"
		return allow.Run(ctx, o)
	})
	if disallow {
		cmd = allow.NewCmdDisallow(w.f, func(ctx context.Context, o *allow.Options) error {
			o.By = "stemctl disallow on /dev/pts/7"
			return allow.Run(ctx, o)
		})
	}
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.Execute()
}

func (w *world) entry(t *testing.T) consent.Entry {
	t.Helper()
	st, _ := consent.Open(w.state)
	e, err := st.Get(context.Background(), "i1")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAllowRecordsOnTheHostAndAudits: allow and disallow change the host's
// record for the instance's container and write who did it to the audit
// log; --json lists them.
func TestAllowRecordsOnTheHostAndAudits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cid := strings.Repeat("ab", 32)
	if err := w.run(t, false, "i1", "%3"); err != nil {
		t.Fatal(err)
	}
	if err := w.run(t, false, "i1", "--edit", filepath.Join(w.card, "t1", "notes.md")); err != nil {
		t.Fatal(err)
	}
	e := w.entry(t)
	if !e.PaneAllowed(cid, "%3") || e.PaneAllowed(cid, "%4") || !e.Editable("t1/notes.md") {
		t.Fatalf("entry %+v", e)
	}
	if err := w.run(t, false, "i1", "--json"); err != nil {
		t.Fatal(err)
	}
	var l allow.Listing
	out := w.out.String()
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "{\n  \"instance\""):]), &l); err != nil || len(l.Panes) != 1 || l.Panes[0].By != "stemctl allow on /dev/pts/7" || len(l.Edits) != 1 {
		t.Fatalf("listing %+v %v\n%s", l, err, out)
	}
	if err := w.run(t, true, "i1", "%3"); err != nil {
		t.Fatal(err)
	}
	if err := w.run(t, true, "i1", "--edit", "t1/notes.md"); err != nil {
		t.Fatal(err)
	}
	if e := w.entry(t); len(e.Panes) != 0 || len(e.Edits) != 0 {
		t.Fatalf("after disallow %+v", e)
	}
	log, _ := audit.Open(w.state)
	ents, err := log.Read(audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, en := range ents {
		if en.Event == audit.Consent && en.Instance == "i1" {
			details = append(details, en.Detail)
		}
	}
	want := []string{"allow keys to pane %3", "allow agents to edit t1/notes.md", "disallow keys to pane %3", "disallow agents to edit t1/notes.md"}
	if len(details) != len(want) {
		t.Fatalf("audit %q", details)
	}
	for i, d := range details {
		if !strings.HasPrefix(d, want[i]) || !strings.Contains(d, "/dev/pts/7") {
			t.Errorf("audit %d: %q, want %q by /dev/pts/7", i, d, want[i])
		}
	}
}

// TestAllowRefusesBadInput: no file outside the card or in its state, no
// pane that is not a pane id, nothing for an unknown instance.
func TestAllowRefusesBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, c := range []struct {
		disallow bool
		args     []string
		want     string
	}{
		{false, []string{"i1", "3"}, "not a tmux pane id"},
		{false, []string{"i1", "%1;x"}, "not a tmux pane id"},
		{false, []string{"i1", "%1", "--edit", "a.c"}, "not both"},
		{false, []string{"i1", "--edit", "../x"}, "not a path inside the card"},
		{false, []string{"i1", "--edit", "/etc/passwd"}, "not inside the card"},
		{false, []string{"i1", "--edit", ".git/config"}, "never edit"},
		{false, []string{"i2", "%1"}, "no such instance"},
		{true, []string{"i1"}, "give the PANE"},
	} {
		if err := w.run(t, c.disallow, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(w.state, "consent.json")); !os.IsNotExist(err) {
		t.Errorf("a refused change wrote the store: %v", err)
	}
}

// TestCompletion: the instance, then the panes allowed now (what disallow
// takes back).
func TestCompletion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.run(t, false, "i1", "%3"); err != nil {
		t.Fatal(err)
	}
	cmd := allow.NewCmdDisallow(w.f, nil)
	cmd.SetContext(context.Background())
	got, _ := cmd.ValidArgsFunction(cmd, []string{"i1"}, "%")
	if len(got) != 1 || !strings.HasPrefix(got[0], "%3\t") {
		t.Fatalf("panes: %q", got)
	}
	got, _ = cmd.ValidArgsFunction(cmd, nil, "i")
	if len(got) != 1 || !strings.HasPrefix(got[0], "i1\t") {
		t.Fatalf("instances: %q", got)
	}
}
