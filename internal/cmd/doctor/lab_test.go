package doctor

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/iostreams"
)

func TestLabDoctorArgs(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	var got *LabOptions
	cmd := NewCmdLabDoctor(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *LabOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"alice", "--json"})
	if err := cmd.Execute(); err != nil || got == nil || got.Name != "alice" || !got.JSON {
		t.Fatalf("err %v, options %+v", err, got)
	}
	cmd = NewCmdLabDoctor(&cmdutil.Factory{IOStreams: ios}, func(context.Context, *LabOptions) error { return nil })
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); !cmdutil.IsFlagError(err) {
		t.Fatalf("no account named: %v", err)
	}
}

func TestLabDoctorRefusals(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Self: func() (string, error) { return "/bin/false", nil }}
	err := RunLab(context.Background(), &LabOptions{F: f, Name: "root", Geteuid: func() int { return 1000 }})
	if err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("not root: %v", err)
	}
	err = RunLab(context.Background(), &LabOptions{F: f, Name: "no-such-account-x", Geteuid: func() int { return 0 }})
	if err == nil || !strings.Contains(err.Error(), `account "no-such-account-x"`) {
		t.Fatalf("unknown account: %v", err)
	}
}
