package agentcmd_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/agent/attach"
	"github.com/stem-edu/stem/internal/cmd/agent/start"
	"github.com/stem-edu/stem/internal/cmd/agent/stop"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

func factory() *cmdutil.Factory {
	ios, _, _, _ := iostreams.Test()
	return &cmdutil.Factory{IOStreams: ios}
}

// Command lines parse into the options the run functions get; provider
// arguments after -- are passed on untouched.
func TestStartArguments(t *testing.T) {
	var got *start.Options
	cmd := start.NewCmdStart(factory(), func(_ context.Context, o *start.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"codex", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv", "--level", "observe", "--background", "--", "--model", "o4-mini", "--level"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Provider != "codex" || !slices.Equal(got.Args, []string{"rp2350", "demo", "hello", "3"}) || got.Target != "rp2350-rv" ||
		got.Level != "observe" || !got.Background || got.Here || !slices.Equal(got.Extra, []string{"--model", "o4-mini", "--level"}) {
		t.Fatalf("options %+v", got)
	}
	for _, args := range [][]string{{"codex", "hazard3-sim", "inf", "bss"}, {"codex", "hazard3-sim", "inf", "bss", "--", "4"}, {}} {
		cmd := start.NewCmdStart(factory(), func(context.Context, *start.Options) error { t.Fatal("ran"); return nil })
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if err == nil || !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "PROVIDER PROFILE SERIES CARD TASK") {
			t.Fatalf("%v: %v", args, err)
		}
	}
	// PROVIDER alone: Run takes the task directory's instance.
	got = nil
	cmd = start.NewCmdStart(factory(), func(_ context.Context, o *start.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"claude", "--", "-p", "hi"})
	if err := cmd.Execute(); err != nil || got.Provider != "claude" || len(got.Args) != 0 || !slices.Equal(got.Extra, []string{"-p", "hi"}) {
		t.Fatalf("provider alone: %v %+v", err, got)
	}
	if got := start.NewCmdStart(factory(), nil).Flags().Lookup("level").DefValue; got != "assist" {
		t.Fatalf("default level %q", got)
	}
}

func TestAttachArguments(t *testing.T) {
	var got *attach.Options
	cmd := attach.NewCmdAttach(factory(), func(_ context.Context, o *attach.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"claude", "--instance", "native-amd64-demo-hello-t1", "--here", "--", "-p", "hi"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Provider != "claude" || got.Instance != "native-amd64-demo-hello-t1" || !got.Here || !slices.Equal(got.Extra, []string{"-p", "hi"}) {
		t.Fatalf("options %+v", got)
	}
	// Without --instance, Run takes the task directory's.
	got = nil
	cmd = attach.NewCmdAttach(factory(), func(_ context.Context, o *attach.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"claude"})
	if err := cmd.Execute(); err != nil || got.Provider != "claude" || got.Instance != "" {
		t.Fatalf("no instance: %v %+v", err, got)
	}
}

func TestStopSelectors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "name the agents to stop"},
		{[]string{"--all", "--instance", "x"}, "--all stops every agent"},
		{[]string{"codex"}, `"codex" is not an agent id`},
	} {
		cmd := stop.NewCmdStop(factory(), func(context.Context, *stop.Options) error { t.Fatal("ran"); return nil })
		cmd.SetArgs(c.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	var got *stop.Options
	cmd := stop.NewCmdStop(factory(), func(_ context.Context, o *stop.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"a1b2c3", "0f0f0f"})
	if err := cmd.Execute(); err != nil || !slices.Equal(got.IDs, []string{"a1b2c3", "0f0f0f"}) {
		t.Fatalf("%v %+v", err, got)
	}
}

// start and attach refuse an unknown --level as a usage mistake before
// they look at the provider or an instance (the factory has neither).
func TestLaunchRefusesUnknownLevel(t *testing.T) {
	for name, cmd := range map[string]*cobra.Command{
		"start":  start.NewCmdStart(factory(), nil),
		"attach": attach.NewCmdAttach(factory(), nil),
	} {
		args := []string{"codex", "rp2350", "demo", "hello", "3", "--level", "admin"}
		if name == "attach" {
			args = []string{"codex", "--instance", "native-amd64-demo-hello-t1", "--level", "admin"}
		}
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if err == nil || !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), `--level: unknown level "admin"`) {
			t.Errorf("%s --level admin: %v", name, err)
		}
	}
}
