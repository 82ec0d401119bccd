package mcpcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/root"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/testenv/examplecheck"
)

func newTestRoot() (*cobra.Command, *bytes.Buffer) {
	ios, _, out, _ := iostreams.Test()
	return NewCmdRoot(ios, func(string) string { return "" }), out
}

// TestExamples parses every Example line of every stem-mcp command the
// way the shell and cobra would, without running anything, and checks the
// help text's references to commands (stemctl's too) and flags' choices.
func TestExamples(t *testing.T) {
	stemMCP := examplecheck.Tree{Binary: "stem-mcp", New: func() *cobra.Command { c, _ := newTestRoot(); return c }}
	stemctl := examplecheck.Tree{Binary: "stemctl", New: func() *cobra.Command {
		ios, _, _, _ := iostreams.Test()
		return root.NewCmdRoot(&cmdutil.Factory{IOStreams: ios})
	}}
	for _, p := range examplecheck.Check(stemMCP, examplecheck.Options{}, stemctl) {
		t.Error(p)
	}
}

// TestExamplesCoverEveryCommand: every command shows how it is run (gate
// shows how sshd runs it).
func TestExamplesCoverEveryCommand(t *testing.T) {
	r, _ := newTestRoot()
	for _, c := range r.Commands() {
		if c.Runnable() && !c.Hidden && c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
	}
}

func TestCompletion(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		r, out := newTestRoot()
		r.SetArgs(args)
		if err := r.Execute(); err != nil {
			t.Fatalf("stem-mcp %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	if out := run("completion", "bash"); !strings.Contains(out, "complete -o default -F __start_stem-mcp stem-mcp") {
		t.Errorf("stem-mcp completion bash: no complete line in:\n%.400s", out)
	}
	for _, sub := range []string{"serve", "tools"} {
		out := run(cobra.ShellCompRequestCmd, sub, "--level", "")
		if !strings.HasPrefix(out, "observe\nassist\nfull\n:") {
			t.Errorf("stem-mcp %s --level completes:\n%s", sub, out)
		}
	}
}
