package proposals

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/xdg"
)

// TestCommand: the flags parse; list, show, and accept without a terminal
// (refused) or with --yes (applied to the saved file, no editor running).
func TestCommand(t *testing.T) {
	t.Parallel()
	state, card := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(card, "t1"), 0o755)
	os.WriteFile(filepath.Join(card, "t1", "a.c"), []byte("one\ntwo\n"), 0o644)
	reg, err := registry.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	inst := registry.Record{Instance: "native-amd64-inf-bss-t1", CardPath: card, SocketDir: filepath.Join(state, "nosock")}
	if err := reg.Put(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	r := &proposals.Record{Key: strings.Repeat("c", 32), ID: "p1", Instance: inst.Instance, Card: card, Path: "t1/a.c", From: "agent \x1b[2Jx", Created: time.Now(),
		Hunks: []proposals.Hunk{{Start: 2, Old: []string{"two"}, New: []string{"TWO \x1b]52;c;eA==\x07"}, State: proposals.Pending}}}
	if err := proposals.Open(state, inst.Instance).Put(r); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		ios, _, out, errOut := iostreams.Test()
		f := &cmdutil.Factory{IOStreams: ios,
			Dirs:     func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil },
			Registry: func() (*registry.Registry, error) { return reg, nil },
			Audit:    func() (*audit.Log, error) { return audit.Open(state) }}
		cmd := NewCmdProposals(f, nil)
		cmd.SetArgs(args)
		cmd.SetOut(out)
		cmd.SetErr(errOut)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}
	var got *Options
	cmd := NewCmdProposals(&cmdutil.Factory{}, func(_ context.Context, verb string, o *Options) error {
		if verb == "accept" {
			got = o
		}
		return nil
	})
	cmd.SetArgs([]string{"accept", "p3", "--hunk", "2", "--hunk", "3", "-i", "x", "--yes"})
	if err := cmd.Execute(); err != nil || got == nil || got.ID != "p3" || len(got.Hunks) != 2 || got.Instance != "x" || !got.Yes {
		t.Fatalf("parsed %+v %v", got, err)
	}
	if out, err := run(); err != nil || !strings.Contains(out, "p1") || strings.Contains(out, "\x1b") {
		t.Fatalf("list: %v %q", err, out)
	}
	if out, err := run("show", "p1"); err != nil || !strings.Contains(out, "-two") || !strings.Contains(out, "+TWO ") || strings.Contains(out, "\x1b") || strings.Contains(out, "\x07") {
		t.Fatalf("show: %v %q", err, out)
	}
	if _, err := run("accept", "p1"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("accept without a terminal: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(card, "t1", "a.c")); string(b) != "one\ntwo\n" {
		t.Fatalf("refused accept wrote %q", b)
	}
	if out, err := run("accept", "p1", "--yes"); err != nil || !strings.Contains(out, "saved file") {
		t.Fatalf("accept --yes: %v %q", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(card, "t1", "a.c")); string(b) != "one\nTWO \x1b]52;c;eA==\x07\n" {
		t.Fatalf("accepted file %q", b)
	}
	if out, err := run(); err != nil || !strings.Contains(out, "no pending proposals") {
		t.Fatalf("list after: %v %q", err, out)
	}
}

// TestAcceptAsksOnTheTerminal: on a terminal, accept shows the diff and
// takes a yes from it; "n" (or anything but y) decides nothing. The audit
// log names the terminal.
func TestAcceptAsksOnTheTerminal(t *testing.T) {
	t.Parallel()
	state, card := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(card, "t1"), 0o755)
	file := filepath.Join(card, "t1", "a.c")
	os.WriteFile(file, []byte("one\ntwo\n"), 0o644)
	reg, _ := registry.Open(state)
	inst := registry.Record{Instance: "i1", CardPath: card, SocketDir: filepath.Join(state, "nosock")}
	if err := reg.Put(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	r := &proposals.Record{Key: strings.Repeat("d", 32), ID: "p1", Instance: "i1", Card: card, Path: "t1/a.c", From: "agent a1", Created: time.Now(),
		Hunks: []proposals.Hunk{{Start: 1, Old: []string{"one"}, New: []string{"ONE"}, State: proposals.Pending}}}
	if err := proposals.Open(state, "i1").Put(r); err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	answer := func(a string) (string, error) {
		ios, _, out, errOut := iostreams.Test()
		ios.In = tty
		f := &cmdutil.Factory{IOStreams: ios,
			Dirs:     func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil },
			Registry: func() (*registry.Registry, error) { return reg, nil },
			Audit:    func() (*audit.Log, error) { return audit.Open(state) }}
		if _, err := ptmx.Write([]byte(a + "\n")); err != nil {
			t.Fatal(err)
		}
		err := Decide(context.Background(), &Options{F: f, ID: "p1"}, true)
		return out.String() + errOut.String(), err
	}
	out, err := answer("n")
	if err == nil || !strings.Contains(out, "-one") || !strings.Contains(out, "accept p1? [y/N]") || !strings.Contains(out, "nothing was decided") {
		t.Fatalf("answered n: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(file); string(b) != "one\ntwo\n" {
		t.Fatalf("n applied: %q", b)
	}
	if out, err := answer("y"); err != nil || !strings.Contains(out, "accepted") {
		t.Fatalf("answered y: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(file); string(b) != "ONE\ntwo\n" {
		t.Fatalf("y did not apply: %q", b)
	}
	lg, _ := audit.Open(state)
	es, err := lg.Read(audit.Filter{})
	if err != nil || len(es) != 1 || !strings.Contains(es[0].Detail, "accepted by the student at stemctl proposals on "+tty.Name()) {
		t.Fatalf("audit %+v %v", es, err)
	}
}
