package examplecheck

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
)

func noRun(*cobra.Command, []string) error { panic("an example was run") }

// demoTree has one mistake of each kind Check finds, and lines that are
// right in each way Check must accept.
func demoTree() *cobra.Command {
	root := &cobra.Command{Use: "demo <command>", Short: "Demo",
		Long: "Use `demo get` or `demo grp leaf|other`; `demo grp nope` is gone. `other-tool x` is not ours."}
	var level, tty, mode string
	var asJSON bool
	get := &cobra.Command{
		Use:   "get NAME --level a|b|c",
		Short: "Get one thing",
		Args:  cobra.ExactArgs(1),
		RunE:  noRun,
		Example: `  demo get one --level a
  # a comment
  demo get one --level b \
      --json
  demo get one --json | jq -r '.x | .y'
  ssh -o 'ProxyCommand=/usr/bin/demo get %h' host
  demo get one --level d
  demo get one two
  demo get one --nope
  demo gte one
  demo grp
  other get one
  demo get 'unterminated
  ssh host demo get one
  demo get one --out ~/x`,
	}
	get.Flags().StringVar(&level, "level", "", "the level: a, b or c")
	get.Flags().StringVar(&tty, "out", "", "a file")
	get.Flags().StringVar(&mode, "mode", "", "fast or slow (default fast)")
	get.Flags().BoolVar(&asJSON, "json", false, "JSON")
	get.RegisterFlagCompletionFunc("level", cmdutil.Fixed("a", "b", "c"))

	grp := &cobra.Command{Use: "grp", Short: "A group.", Example: "   demo grp leaf --req x"}
	var req string
	leaf := &cobra.Command{Use: "leaf --req X", Short: "List leaves", Args: cobra.NoArgs, RunE: noRun,
		Example: "  demo grp leaf --req x\n  demo grp leaf\n  demo get one"}
	leaf.Flags().StringVar(&req, "req", "", "required")
	leaf.MarkFlagRequired("req")
	other := &cobra.Command{Use: "other --missing", Short: "other", Args: cobra.NoArgs, RunE: noRun,
		Example: "  demo get one"}
	grp.AddCommand(leaf, other)
	root.AddCommand(get, grp)
	return root
}

func TestCheck(t *testing.T) {
	got := Check(Tree{Binary: "demo", New: demoTree}, Options{})
	want := []string{
		"demo: Long mentions `demo grp nope`: no command \"nope\" under demo grp",
		"demo get: --mode: usage lists its values (fast, slow) but the flag registers no completion (cmdutil.Fixed)",
		`demo get: Example "demo get one --level d": demo get: --level d: not one of a, b, c`,
		`demo get: Example "demo get one two": accepts 1 arg(s), received 2`,
		`demo get: Example "demo get one --nope": demo get: unknown flag: --nope`,
		`demo get: Example "demo gte one": unknown command "gte" for "demo"`,
		`demo get: Example "demo grp": demo grp is not a command by itself ([])`,
		`demo get: Example "other get one": runs other, not one of demo`,
		`demo get: Example "demo get 'unterminated": unterminated single quote`,
		`demo get: Example "ssh host demo get one": runs ssh, not one of demo`,
		`demo grp: Example: line 1 is not indented by two spaces: "   demo grp leaf --req x"`,
		"demo grp leaf: Example \"demo grp leaf\": demo grp leaf: required flag(s) \"req\" not set",
		"demo grp leaf: prints data (\"List leaves\") but has no --json",
		"demo grp other: Example has no line that runs demo grp other",
		"demo grp other: Short starts lower-case: \"other\"",
		"demo grp other: Use shows --missing, which the command does not have",
		"demo grp: Short ends with a period: \"A group.\"",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckLines checks single lines, the right ones too: Check reports
// nothing for those.
func TestCheckLines(t *testing.T) {
	c := &checker{trees: map[string]Tree{"demo": {Binary: "demo", New: demoTree}}}
	for _, tc := range []struct{ line, want string }{
		{"demo get one --level a", ""},
		{"demo get one --level b --json", ""},
		{"demo get one --json | jq -r '.x | .y'", ""},
		{"ssh -o 'ProxyCommand=/usr/bin/demo get %h' host", ""},
		{"demo get one --out ~/x", ""},
		{"demo get one --level d", "--level d: not one of a, b, c"},
		{"demo get one two", "accepts 1 arg(s), received 2"},
		{"demo get one --nope", "unknown flag: --nope"},
		{"demo gte one", `unknown command "gte" for "demo"`},
		{"demo grp", "demo grp is not a command by itself"},
		{"demo grp lief", "demo grp is not a command by itself"},
		{"other get one", "runs other, not one of demo"},
		{"ssh host demo get one", "runs ssh, not one of demo"},
		{"demo get 'unterminated", "unterminated single quote"},
	} {
		path, err := c.line(tc.line)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.want == "" && path != "demo get":
			t.Errorf("%q runs %q, want demo get", tc.line, path)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one with %q", tc.line, err, tc.want)
		}
	}
}

func TestLines(t *testing.T) {
	got, err := Lines("  a b \\\n      c\n\n  # note\n  d 'e f'\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a b c", "d 'e f'"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"a", "    a", "\ta", "  a \\\n  b", "  a \\"} {
		if _, err := Lines(bad); err == nil {
			t.Errorf("Lines(%q): no error", bad)
		}
	}
}
