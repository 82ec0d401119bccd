package root

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpcmd"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv/examplecheck"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

var errNoDeps = errors.New("the examples test provides no dependencies")

// newTestRoot builds stemctl's tree with a Factory that has nothing to
// give: building the tree, parsing and completing must not need it (a
// completion that does returns nothing).
func newTestRoot() (*cobra.Command, *bytes.Buffer) {
	ios, _, out, _ := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(string) string { return "" },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{}, errNoDeps },
		Registry:  func() (*registry.Registry, error) { return nil, errNoDeps },
		Workspace: func() (*workspace.Workspace, error) { return nil, errNoDeps },
		Engine:    func(context.Context) (engine.Engine, error) { return nil, errNoDeps },
		MCPBinary: func() (string, error) { return "", errNoDeps },
		Self:      func() (string, error) { return "", errNoDeps },
		Layout:    func() (sockets.Layout, error) { return sockets.Layout{}, errNoDeps },
		Audit:     func() (*audit.Log, error) { return nil, errNoDeps },
		Manager:   func(context.Context) (*instance.Manager, error) { return nil, errNoDeps },
		Checker:   func(context.Context) (*verify.Checker, error) { return nil, errNoDeps },
	}
	return NewCmdRoot(f), out
}

var (
	stemctlTree = examplecheck.Tree{Binary: "stemctl", New: func() *cobra.Command { c, _ := newTestRoot(); return c }}
	stemMCPTree = examplecheck.Tree{Binary: "stem-mcp", New: func() *cobra.Command {
		ios, _, _, _ := iostreams.Test()
		return mcpcmd.NewCmdRoot(ios, func(string) string { return "" })
	}}
	// --device completes the devices plugged in now; any path is accepted.
	checkOptions = examplecheck.Options{OpenFlags: []string{"device"}}
)

// knownProblems are problems in files this test's author could not change
// (internal/cmd/teacher, internal/cmd/mcp): each is reported to be fixed
// there, and the test fails when one is gone so that the entry goes too.
var knownProblems = []string{}

// TestExamples parses every Example line of every stemctl command the way
// the shell and cobra would, without running anything, and checks the help
// text's references to commands and flags' choices (see examplecheck).
func TestExamples(t *testing.T) {
	problems := examplecheck.Check(stemctlTree, checkOptions, stemMCPTree)
	checkProblems(t, problems, knownProblems)
}

func checkProblems(t *testing.T, problems, known []string) {
	t.Helper()
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	seen := map[string]bool{}
	for _, p := range problems {
		seen[p] = true
		if !isKnown[p] {
			t.Error(p)
		}
	}
	for _, k := range known {
		if !seen[k] {
			t.Errorf("known problem no longer occurs; remove it from knownProblems: %s", k)
		}
	}
}

// TestExamplesCoverEveryCommand: every command a user runs shows how.
func TestExamplesCoverEveryCommand(t *testing.T) {
	root, _ := newTestRoot()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden && c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

func execute(t *testing.T, args ...string) string {
	t.Helper()
	root, out := newTestRoot()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("stemctl %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestCompletionScripts: `stemctl completion SHELL` prints a script that
// registers stemctl's completion.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_stemctl stemctl",
		"zsh":  "#compdef stemctl",
		"fish": "complete -c stemctl ",
	} {
		if out := execute(t, "completion", shell); !strings.Contains(out, want) {
			t.Errorf("stemctl completion %s: no %q in:\n%.400s", shell, want, out)
		}
	}
}

// TestFlagCompletions asks cobra's completion command (what the shell
// scripts run) for flags with fixed values.
func TestFlagCompletions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"build", "x", "--tty", ""}, []string{"auto", "always", "never"}},
		{[]string{"test", "x", "--tty", ""}, []string{"auto", "always", "never"}},
		{[]string{"run", "x", "--tty", ""}, []string{"auto", "always", "never"}},
		{[]string{"deploy", "x", "--tty", ""}, []string{"auto", "always", "never"}},
		{[]string{"exec", "x", "--tty", ""}, []string{"auto", "always", "never"}},
		{[]string{"access", "grant", "--level", ""}, []string{"observe", "assist", "full"}},
		{[]string{"agent", "attach", "codex", "--level", ""}, []string{"observe", "assist", "full"}},
		{[]string{"audit", "show", "--level", ""}, []string{"observe", "assist", "full"}},
		{[]string{"up", "rp2350", "demo", "hello", "3", "--target", ""}, []string{"rp2350-rv", "rp2350-arm"}},
		{[]string{"teacher", "config", "--provider", ""}, []string{"codex", "claude", "gemini"}},
	} {
		out := execute(t, append([]string{cobra.ShellCompRequestCmd}, tc.args...)...)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(l, ":") || l == "" {
				continue // the directive line
			}
			v, _, _ := strings.Cut(l, "\t")
			got = append(got, v)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("stemctl %s: completes %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
