// Package examplecheck checks a cobra command tree's help against the tree
// itself: every Example line must name a command that exists and parse the
// way a shell and cobra would parse it (flags, required flags, argument
// count, a flag's fixed choices), and backquoted references to commands in
// the help text must name commands that exist. Nothing is run: a command's
// RunE is never called. stemctl's and stem-mcp's tests use it.
package examplecheck

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stem-edu/stem/internal/lib/shellwords"
)

// Tree is a binary's command tree. New must build a fresh tree every call:
// parsing an example sets the flags' variables, so each example gets its own.
type Tree struct {
	Binary string
	New    func() *cobra.Command
}

// Options tune Check.
type Options struct {
	// OpenFlags names flags whose completions are suggestions (what is
	// present now) rather than the only accepted values, such as --device.
	OpenFlags []string
}

// Check checks the help of every command of t (hidden ones included) and
// returns one line per problem. refs resolve example lines and references
// that name another binary (stemctl's help mentions stem-mcp and back).
func Check(t Tree, opts Options, refs ...Tree) []string {
	c := &checker{trees: map[string]Tree{t.Binary: t}, open: map[string]bool{}}
	for _, r := range refs {
		c.trees[r.Binary] = r
	}
	for _, f := range opts.OpenFlags {
		c.open[f] = true
	}
	root := t.New()
	initDefaults(root)
	walk(root, func(cmd *cobra.Command) { c.command(cmd) })
	// A Use line and a usage can report the same missing completion.
	seen := map[string]bool{}
	var out []string
	for _, p := range c.problems {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

type checker struct {
	trees    map[string]Tree
	open     map[string]bool
	problems []string
}

func (c *checker) addf(cmd *cobra.Command, format string, args ...any) {
	c.problems = append(c.problems, cmd.CommandPath()+": "+fmt.Sprintf(format, args...))
}

func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, s := range cmd.Commands() {
		walk(s, fn)
	}
}

// initDefaults adds what Execute adds before it parses: the help and
// completion commands and the help and version flags.
func initDefaults(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root, func(cmd *cobra.Command) {
		cmd.InitDefaultHelpFlag()
		cmd.InitDefaultVersionFlag()
	})
}

// command checks one command's help text.
func (c *checker) command(cmd *cobra.Command) {
	if isGenerated(cmd) {
		return
	}
	c.shortText(cmd)
	c.refsIn(cmd, "Short", cmd.Short)
	c.refsIn(cmd, "Long", cmd.Long)
	c.useFlags(cmd)
	c.flagChoices(cmd)
	c.jsonFlag(cmd)
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		c.refsIn(cmd, "--"+f.Name, f.Usage)
	})
	if cmd.Example == "" {
		return
	}
	lines, err := Lines(cmd.Example)
	if err != nil {
		c.addf(cmd, "Example: %v", err)
		return
	}
	self := false
	for _, l := range lines {
		found, err := c.line(l)
		if err != nil {
			c.addf(cmd, "Example %q: %v", l, err)
			continue
		}
		if found == cmd.CommandPath() {
			self = true
		}
	}
	if cmd.Runnable() && !self {
		c.addf(cmd, "Example has no line that runs %s", cmd.CommandPath())
	}
}

// isGenerated reports cobra's own help and completion commands.
func isGenerated(cmd *cobra.Command) bool {
	for p := cmd; p.HasParent(); p = p.Parent() {
		if p.Parent() == cmd.Root() && (p.Name() == "help" || p.Name() == "completion") {
			return true
		}
	}
	return false
}

// shortText: one line, capitalised, no final period (cobra's convention,
// and what `stemctl --help` lists one command per line).
func (c *checker) shortText(cmd *cobra.Command) {
	s := cmd.Short
	switch {
	case s == "":
		c.addf(cmd, "no Short")
	case strings.Contains(s, "\n"):
		c.addf(cmd, "Short spans lines")
	case strings.HasSuffix(s, "."):
		c.addf(cmd, "Short ends with a period: %q", s)
	case s[0] >= 'a' && s[0] <= 'z':
		c.addf(cmd, "Short starts lower-case: %q", s)
	}
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// refsIn checks every backquoted command reference in text, such as
// `stemctl mcp select` or `stemctl build|test|run`: the words that name
// commands (up to the first flag or placeholder) must name commands of that
// binary, each alternative of a|b|c too.
func (c *checker) refsIn(cmd *cobra.Command, what, text string) {
	for _, m := range backquoted.FindAllStringSubmatch(text, -1) {
		words := strings.Fields(m[1])
		if len(words) == 0 {
			continue
		}
		t, ok := c.trees[words[0]]
		if !ok {
			continue
		}
		if err := resolvePath(t, words[1:]); err != nil {
			c.addf(cmd, "%s mentions `%s`: %v", what, m[1], err)
		}
	}
}

var cmdWord = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)

// resolvePath follows the leading command words of words from t's root.
func resolvePath(t Tree, words []string) error {
	cmds := []*cobra.Command{t.New()}
	initDefaults(cmds[0])
	for _, w := range words {
		if !cmdWord.MatchString(w) || !hasSubcommands(cmds) {
			break
		}
		var next []*cobra.Command
		for _, alt := range strings.Split(w, "|") {
			found := false
			for _, p := range cmds {
				for _, s := range p.Commands() {
					if s.Name() == alt || s.HasAlias(alt) {
						next = append(next, s)
						found = true
					}
				}
			}
			if !found {
				return fmt.Errorf("no command %q under %s", alt, cmds[0].CommandPath())
			}
		}
		cmds = next
	}
	return nil
}

func hasSubcommands(cmds []*cobra.Command) bool {
	for _, c := range cmds {
		if !c.HasSubCommands() {
			return false
		}
	}
	return true
}

var useFlag = regexp.MustCompile(`--([a-z][a-z0-9-]*)(?:[ =]([a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)+))?`)

// useFlags: a flag the Use line shows must exist, and choices it shows
// (--level observe|assist|full) must be the flag's completions.
func (c *checker) useFlags(cmd *cobra.Command) {
	if cmd.DisableFlagParsing {
		return // the command parses its own flags; cobra cannot see them
	}
	for _, m := range useFlag.FindAllStringSubmatch(cmd.Use, -1) {
		f := cmd.Flags().Lookup(m[1])
		if f == nil {
			f = cmd.InheritedFlags().Lookup(m[1])
		}
		if f == nil {
			c.addf(cmd, "Use shows --%s, which the command does not have", m[1])
			continue
		}
		if m[2] != "" {
			c.sameChoices(cmd, f, "Use", strings.Split(m[2], "|"))
		}
	}
}

var (
	// "observe, assist or full (required)", "allocate a terminal: auto,
	// always or never", "user or project (which ...)".
	usageList = regexp.MustCompile(`^(?:[^:(]*: )?((?:[a-z][a-z0-9_-]*, )*[a-z][a-z0-9_-]*,? or [a-z][a-z0-9_-]*)(?: \(|;|$)`)
	// "only this level (observe, assist, full)".
	usageParens = regexp.MustCompile(`\(((?:[a-z][a-z0-9_-]*, )+[a-z][a-z0-9_-]*)\)`)
	listSep     = regexp.MustCompile(`,? or |, `)
)

// flagChoices: a string flag whose usage lists its values must complete
// exactly those values.
func (c *checker) flagChoices(cmd *cobra.Command) {
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() != "string" || f.Hidden {
			return
		}
		var list string
		if m := usageList.FindStringSubmatch(f.Usage); m != nil {
			list = m[1]
		} else if m := usageParens.FindStringSubmatch(f.Usage); m != nil {
			list = m[1]
		} else {
			return
		}
		c.sameChoices(cmd, f, "usage", listSep.Split(list, -1))
	})
}

func (c *checker) sameChoices(cmd *cobra.Command, f *pflag.Flag, where string, want []string) {
	fn, ok := cmd.GetFlagCompletionFunc(f.Name)
	if !ok {
		c.addf(cmd, "--%s: %s lists its values (%s) but the flag registers no completion (cmdutil.Fixed)", f.Name, where, strings.Join(want, ", "))
		return
	}
	got, err := complete(fn, cmd, nil)
	if err != nil {
		c.addf(cmd, "--%s: completion: %v", f.Name, err)
		return
	}
	if !equalSets(got, want) {
		c.addf(cmd, "--%s: %s lists %v, completion offers %v", f.Name, where, want, got)
	}
}

// jsonFlag: a command that lists or shows things prints data, and data
// comes as JSON with --json.
func (c *checker) jsonFlag(cmd *cobra.Command) {
	if !cmd.Runnable() || cmd.Hidden {
		return
	}
	first, _, _ := strings.Cut(cmd.Short, " ")
	if (first == "List" || first == "Show") && cmd.Flags().Lookup("json") == nil {
		c.addf(cmd, "prints data (%q) but has no --json", cmd.Short)
	}
}

// line checks one example command line and returns the path of the
// command it runs.
func (c *checker) line(l string) (string, error) {
	words, err := Words(l)
	if err != nil {
		return "", err
	}
	bin := path.Base(words[0])
	t, ok := c.trees[bin]
	if !ok {
		if words[0] == "ssh" {
			if inner, ok := proxyCommand(words[1:]); ok {
				return c.line(inner)
			}
		}
		return "", fmt.Errorf("runs %s, not one of %s", words[0], c.binaries())
	}
	return c.args(t, words[1:])
}

func (c *checker) binaries() string {
	var b []string
	for n := range c.trees {
		b = append(b, n)
	}
	sort.Strings(b)
	return strings.Join(b, ", ")
}

// proxyCommand returns the command of an ssh -o ProxyCommand=... option:
// an example that shows how ssh runs a command of ours.
func proxyCommand(args []string) (string, bool) {
	for i, a := range args {
		opt := ""
		switch {
		case a == "-o" && i+1 < len(args):
			opt = args[i+1]
		case strings.HasPrefix(a, "-o"):
			opt = a[2:]
		}
		if k, v, ok := strings.Cut(opt, "="); ok && strings.EqualFold(k, "ProxyCommand") {
			return v, true
		}
	}
	return "", false
}

// args parses args the way Execute would, up to (not including) running
// the command.
func (c *checker) args(t Tree, args []string) (string, error) {
	root := t.New()
	initDefaults(root)
	cmd, rest, err := root.Find(args)
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n") // not the suggestions
		return "", errors.New(first)
	}
	if !cmd.Runnable() {
		return "", fmt.Errorf("%s is not a command by itself (%v)", cmd.CommandPath(), rest)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return "", fmt.Errorf("%s: %v", cmd.CommandPath(), err)
	}
	positional := cmd.Flags().Args()
	if cmd.DisableFlagParsing {
		positional = rest
	}
	if err := cmd.ValidateArgs(positional); err != nil {
		return "", err
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return "", fmt.Errorf("%s: %v", cmd.CommandPath(), err)
	}
	if err := cmd.ValidateFlagGroups(); err != nil {
		return "", fmt.Errorf("%s: %v", cmd.CommandPath(), err)
	}
	var problems []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if c.open[f.Name] {
			return
		}
		fn, ok := cmd.GetFlagCompletionFunc(f.Name)
		if !ok {
			return
		}
		choices, err := complete(fn, cmd, positional)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--%s: completion: %v", f.Name, err))
			return
		}
		if len(choices) == 0 {
			return // nothing to compare with (instances, agents: none here)
		}
		for _, v := range flagValues(f) {
			if !contains(choices, v) {
				problems = append(problems, fmt.Sprintf("--%s %s: not one of %s", f.Name, v, strings.Join(choices, ", ")))
			}
		}
	})
	if len(problems) > 0 {
		return "", fmt.Errorf("%s: %s", cmd.CommandPath(), strings.Join(problems, "; "))
	}
	return cmd.CommandPath(), nil
}

func flagValues(f *pflag.Flag) []string {
	if s, ok := f.Value.(pflag.SliceValue); ok {
		return s.GetSlice()
	}
	return []string{f.Value.String()}
}

// complete calls a flag's completion and returns its values without
// descriptions. A completion that needs what the test does not provide
// may panic; that is reported, not fatal.
func complete(fn cobra.CompletionFunc, cmd *cobra.Command, args []string) (vals []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	out, _ := fn(cmd, args, "")
	for _, o := range out {
		v, _, _ := strings.Cut(o, "\t")
		vals = append(vals, v)
	}
	return vals, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func equalSets(a, b []string) bool {
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return strings.Join(x, "\x00") == strings.Join(y, "\x00")
}

// Lines splits an Example into command lines: lines are indented by two
// spaces (cobra prints Example as it is, under "Examples:"), a line ending
// in a backslash continues on the next, more indented, line, and blank
// lines and # comments are skipped.
func Lines(example string) ([]string, error) {
	var out []string
	cur := ""
	cont := false
	for i, raw := range strings.Split(example, "\n") {
		text := strings.TrimSpace(raw)
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		switch {
		case cont:
			if indent <= 2 {
				return nil, fmt.Errorf("line %d continues line %d but is not indented further", i+1, i)
			}
		case text == "" || strings.HasPrefix(text, "#"):
			continue
		case indent != 2 || strings.HasPrefix(raw, "\t") || strings.HasPrefix(raw, " \t"):
			return nil, fmt.Errorf("line %d is not indented by two spaces: %q", i+1, raw)
		}
		if strings.HasSuffix(text, `\`) {
			cur += strings.TrimSpace(strings.TrimSuffix(text, `\`)) + " "
			cont = true
			continue
		}
		out = append(out, cur+text)
		cur, cont = "", false
	}
	if cont {
		return nil, fmt.Errorf("the last line ends with a backslash")
	}
	return out, nil
}

var tildeWord = regexp.MustCompile(`(^|[ =])~/`)

// Words splits one command line the way the shell would for the command
// it names: a pipe and what follows are another program's, ~/ at the start
// of a word (or after --flag=) is the home directory.
func Words(line string) ([]string, error) {
	line = strings.TrimSpace(cutPipe(line))
	line = tildeWord.ReplaceAllString(line, "${1}/home/user/")
	return shellwords.Split(line)
}

// cutPipe returns line up to its first unquoted |.
func cutPipe(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else if ch == '\\' && quote == '"' {
				i++
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '\\':
			i++
		case ch == '|':
			return line[:i]
		}
	}
	return line
}
