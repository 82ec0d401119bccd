package lab

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

func TestAddFlags(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	var got *AddOptions
	cmd := NewCmdAdd(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *AddOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"anna", "ben", "--cards", "/srv/c", "--image", "a", "--image", "b",
		"--grant", "k.pub", "--teacher", "kow", "--level", "observe", "--lab-dir", "/x", "--host", "lab-03"})
	if err := cmd.Execute(); err != nil || got == nil {
		t.Fatalf("%v %+v", err, got)
	}
	if strings.Join(got.Names, ",") != "anna,ben" || got.Cards != "/srv/c" || strings.Join(got.Images, ",") != "a,b" ||
		got.KeyFile != "k.pub" || got.Teacher != "kow" || got.Level != "observe" || got.Dir != "/x" || got.Host != "lab-03" {
		t.Fatalf("options %+v", got)
	}
	for _, args := range [][]string{
		{},
		{"anna", "--grant", "k.pub"},
		{"anna", "--grant", "k.pub", "--teacher", "kow", "--level", "root"},
	} {
		cmd := NewCmdAdd(&cmdutil.Factory{IOStreams: ios}, func(context.Context, *AddOptions) error { t.Errorf("%v ran", args); return nil })
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestNeedRoot: every command that changes or reads other accounts
// refuses an ordinary user before doing anything.
func TestNeedRoot(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Self: func() (string, error) { t.Error("looked further"); return "", nil }}
	user := func() int { return 1000 }
	c := common{Geteuid: user}
	ctx := context.Background()
	errs := []error{
		RunAdd(ctx, &AddOptions{F: f, common: c, Names: []string{"anna"}}),
		RunImport(ctx, &AddOptions{F: f, common: c, File: "/nonexistent.csv"}),
		RunStatus(ctx, &StatusOptions{F: f, common: c}),
		RunRm(ctx, &RmOptions{F: f, common: c, Names: []string{"anna"}}),
		RunInit(ctx, &InitOptions{F: f, common: c, Prefix: "/nonexistent"}),
		RunUpdate(ctx, &AddOptions{F: f, common: c}),
		RunDoctor(ctx, &DoctorOptions{F: f, common: c, Name: "anna"}),
	}
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "needs root") {
			t.Errorf("command %d: %v", i, err)
		}
	}
}

func TestStatusAndRmArgs(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	var st *StatusOptions
	cmd := NewCmdStatus(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *StatusOptions) error { st = o; return nil })
	cmd.SetArgs([]string{"anna", "--json"})
	if err := cmd.Execute(); err != nil || st == nil || !st.JSON || st.Names[0] != "anna" || st.Dir != DefaultDir {
		t.Fatalf("%v %+v", err, st)
	}
	var rm *RmOptions
	cmd = NewCmdRm(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *RmOptions) error { rm = o; return nil })
	cmd.SetArgs([]string{"anna", "ben"})
	if err := cmd.Execute(); err != nil || rm == nil || len(rm.Names) != 2 {
		t.Fatalf("%v %+v", err, rm)
	}
}

func TestDoctorArgs(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	var got *DoctorOptions
	cmd := NewCmdDoctor(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *DoctorOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"anna", "--json", "--shared-store", "none"})
	if err := cmd.Execute(); err != nil || got == nil || got.Name != "anna" || !got.JSON || got.Store != "none" || got.Dir != DefaultDir {
		t.Fatalf("%v %+v", err, got)
	}
	cmd = NewCmdDoctor(&cmdutil.Factory{IOStreams: ios}, func(context.Context, *DoctorOptions) error { t.Error("ran"); return nil })
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); !cmdutil.IsFlagError(err) {
		t.Fatalf("no account named: %v", err)
	}
}

// TestDoctorRefusals: lab doctor checks only an existing ordinary
// account, before running anything as it.
func TestDoctorRefusals(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(string) string { return "" }, Self: func() (string, error) { return "/bin/false", nil }}
	c := common{Geteuid: func() int { return 0 }, Store: "none"}
	for name, want := range map[string]string{"no-such-account-x": `account "no-such-account-x"`, "root": "system account"} {
		err := RunDoctor(context.Background(), &DoctorOptions{F: f, common: c, Name: name})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestImportBadFile: every bad row is reported and no account is looked
// at (Self would be called first).
func TestImportBadFile(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(string) string { return "" },
		Self: func() (string, error) { t.Error("went on to enrol"); return "", nil }}
	csv := filepath.Join(t.TempDir(), "s.csv")
	os.WriteFile(csv, []byte("name,full name\nanna,Anna\nRoot!\nanna\n"), 0o600)
	err := RunImport(context.Background(), &AddOptions{F: f, common: common{Geteuid: func() int { return 0 }}, File: csv})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "line 4: anna is already on line 2") {
		t.Fatalf("%v", err)
	}
}

// TestPrintDoctor: each line names who answered it; an account's fix is
// marked as its doctor's word and printed on one clean line, and a
// doctor that gave no report gets root's fix.
func TestPrintDoctor(t *testing.T) {
	t.Parallel()
	st := lab.Status{Name: "anna", Missing: []string{"doctor: exit status 2", "subordinate-ids", "workspace"},
		DoctorFix: "(as root) runuser -l anna -c '/usr/local/bin/stemctl doctor'",
		Checks: []lab.Result{
			{Result: doctor.Result{Name: "subordinate-ids", Status: doctor.Fail, Required: true, Detail: "none", Fix: "(as root) usermod --add-subuids 1-2 anna"}, By: lab.ByRoot},
			{Result: doctor.Result{Name: "workspace", Status: doctor.Fail, Required: true, Detail: "gone", Fix: "mkdir x\n\x1b[2Jrm -rf /"}, By: lab.ByAccount},
		}}
	var b bytes.Buffer
	if err := printDoctor(&b, "anna", st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"✗  doctor           root     doctor: exit status 2\n",
		"fix: (as root) runuser -l anna -c '/usr/local/bin/stemctl doctor'\n",
		"✗  subordinate-ids  root     none\n",
		"fix: (as root) usermod --add-subuids 1-2 anna\n",
		"✗  workspace        account  gone\n",
		"fix (anna's doctor says): mkdir x rm -rf /\n",
		"fixed: doctor: exit status 2, subordinate-ids, workspace (reported)\n",
		"root checked subordinate-ids itself;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// The store an enrolling command was given is what the others use when
// they are given none; a command that only looks records nothing.
func TestStoreChoiceRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parse := func(c *common, args ...string) {
		t.Helper()
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return c.storeChoice() }}
		c.flags(cmd)
		cmd.SetArgs(append([]string{"--lab-dir", dir}, args...))
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	status := &common{}
	parse(status)
	if status.Store != lab.DefaultShared.Root {
		t.Fatalf("nothing recorded: %q, want the default", status.Store)
	}
	parse(&common{Records: true}, "--shared-store", "none")
	status = &common{}
	parse(status)
	if status.Store != "none" {
		t.Fatalf("after add --shared-store none: %q", status.Store)
	}
	parse(&common{}, "--shared-store", "/srv/store") // status: looks only
	status = &common{}
	parse(status)
	if status.Store != "none" {
		t.Fatalf("a look changed the record: %q", status.Store)
	}
	parse(&common{Records: true}, "--shared-store", "/srv/store/")
	status = &common{}
	parse(status)
	if status.Store != "/srv/store" {
		t.Fatalf("after init --shared-store /srv/store/: %q", status.Store)
	}
	if err := (&common{Dir: dir, Store: "rel", storeGiven: true}).storeChoice(); err == nil {
		t.Fatal("a relative store was taken")
	}
}

// The closing line names the checks root made, not those it could make:
// a lab with no shared store has no store check to claim.
func TestRootCheckedNamesWhatRootChecked(t *testing.T) {
	t.Parallel()
	res := func(name, by string) lab.Result {
		return lab.Result{Result: doctor.Result{Name: name}, By: by}
	}
	noStore := lab.Status{Name: "anna", Checks: []lab.Result{
		res("subordinate-ids", lab.ByRoot), res("runtime-dir", lab.ByRoot), res("shared-store", lab.ByAccount)}}
	if got := strings.Join(rootChecked(noStore), ","); got != "subordinate-ids,runtime-dir" {
		t.Errorf("no shared store: root checked %q", got)
	}
	withStore := lab.Status{Name: "ben", Checks: []lab.Result{
		res("subordinate-ids", lab.ByRoot), res("shared-store", lab.ByRoot)}}
	if got := strings.Join(rootChecked(noStore, withStore), ","); got != "subordinate-ids,runtime-dir,shared-store" {
		t.Errorf("one account with a shared store: root checked %q", got)
	}
}
