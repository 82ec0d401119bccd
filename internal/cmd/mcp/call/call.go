// Package mcpcall implements `stemctl mcp call`: it has `stem-mcp call` (an
// mcp-go client) start stem-mcp at a level and call one tool, so a student or teacher can
// see exactly what an agent would see, and scripts can use stem-mcp too.
package mcpcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/levels"
)

// Options are call's inputs.
type Options struct {
	F        *cmdutil.Factory
	Level    string
	Instance string
	Tool     string
	Args     []string
	RawJSON  string
	Timeout  time.Duration
	JSON     bool
}

// NewCmdCall builds the command.
func NewCmdCall(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "call TOOL [NAME=VALUE...]",
		Short: "Call one stem-mcp tool through a real MCP session and print the result",
		Long: `Start stem-mcp at the given level (as an agent's configuration would), do the MCP
handshake, call TOOL with the arguments, and print its result. NAME=VALUE arguments
are numbers, true/false or strings (everything after the first =); NAME:=JSON passes
a JSON value (arrays, or a string that looks like a number: n:='"5"'); --args takes
the whole argument object as JSON. A name may be given only once. "resource:URI"
reads a resource instead.`,
		Example: `  stemctl mcp call --level observe session_status
  stemctl mcp call --level observe pane_capture pane=%0 start=-20
  stemctl mcp call --level assist nvim_buffer_edit path=t4/main.c start=3 end=3 'lines:=["int x = 1;"]'
  stemctl mcp call --level observe resource:stem://context`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Tool, opts.Args = args[0], args[1:]
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmd.Flags().StringVar(&opts.Level, "level", levels.Observe.String(), "access level of the stem-mcp started for the call")
	// The tool names of the chosen level (package levels: no server needed).
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		l, err := levels.Parse(opts.Level)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return append(levels.ToolNames(l), "resource:stem://context"), cobra.ShellCompDirectiveNoFileComp
	}
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed(levels.Names()...))
	cmd.Flags().StringVar(&opts.Instance, "instance", "", "a fixed instance instead of the selection")
	cmd.Flags().StringVar(&opts.RawJSON, "args", "", "the tool's arguments as one JSON object")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 60*time.Second, "give up after this long")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// ParseArgs turns NAME=VALUE / NAME:=JSON pairs (on top of the --args
// object raw) into an argument object. NAME=VALUE gives a number when VALUE
// is a JSON number, true/false, and otherwise the string as typed; NAME:=JSON
// gives any JSON value (use it for arrays, objects, and strings that look
// like numbers: n:='"5"'). A name given twice, whether in pairs or in pairs
// and --args, is an error rather than a silent override.
func ParseArgs(pairs []string, raw string) (map[string]any, error) {
	out := map[string]any{}
	if raw != "" {
		if !utf8.ValidString(raw) {
			return nil, cmdutil.FlagErrorf("--args: not valid UTF-8")
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, cmdutil.FlagErrorf("--args: %v", err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			// json.Unmarshal into a map would accept null and leave a nil map.
			return nil, cmdutil.FlagErrorf("--args: want a JSON object, got %s", jsonKind(v))
		}
		out = obj
	}
	for _, p := range pairs {
		// JSON would carry invalid UTF-8 only as U+FFFD: refuse rather than
		// send something else than was typed (two names could even merge).
		if !utf8.ValidString(p) {
			return nil, cmdutil.FlagErrorf("argument %q: not valid UTF-8", p)
		}
		var (
			k   string
			val any
		)
		if name, v, ok := strings.Cut(p, ":="); ok && !strings.Contains(name, "=") {
			j, err := decodeJSON(v)
			if err != nil {
				return nil, cmdutil.FlagErrorf("argument %q: %v", p, err)
			}
			k, val = name, j
		} else {
			name, v, ok := strings.Cut(p, "=")
			if !ok {
				return nil, cmdutil.FlagErrorf("argument %q: want NAME=VALUE or NAME:=JSON", p)
			}
			k, val = name, scalar(v)
		}
		if k == "" {
			return nil, cmdutil.FlagErrorf("argument %q: the name before = or := is empty", p)
		}
		if _, dup := out[k]; dup {
			return nil, cmdutil.FlagErrorf("argument %q: %s is given more than once", p, k)
		}
		out[k] = val
	}
	return out, nil
}

// scalar reads a NAME=VALUE value: true/false and JSON numbers are typed,
// anything else is the string as typed (so "+1", "007", "0x10" and "Inf",
// which Go would read as numbers, stay text).
func scalar(v string) any {
	switch v {
	case "true", "false":
		return v == "true"
	}
	// A JSON number starts with - or a digit and ends with a digit (json.Valid
	// alone would allow surrounding blanks, which json.Number cannot carry).
	if v == "" || !(v[0] == '-' || isDigit(v[0])) || !isDigit(v[len(v)-1]) || !json.Valid([]byte(v)) {
		return v
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	// 2.5, -1e3, or an integer beyond int64: kept as the literal so it
	// round-trips exactly.
	return json.Number(v)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// decodeJSON reads exactly one JSON value, keeping numbers as literals (a
// 64-bit id must not lose digits through float64).
func decodeJSON(s string) (any, error) {
	if !json.Valid([]byte(s)) {
		var v any
		err := json.Unmarshal([]byte(s), &v) // for the position and reason
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return v, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// Run checks the arguments and runs `stem-mcp call`, which starts stem-mcp
// serve and calls the tool with mcp-go's client (stemctl itself does not
// link mcp-go: see package mcpcmd).
func Run(ctx context.Context, opts *Options) error {
	arguments, err := ParseArgs(opts.Args, opts.RawJSON)
	if err != nil {
		return err
	}
	if _, err := levels.Parse(opts.Level); err != nil {
		return cmdutil.FlagErrorf("--level: %v", err)
	}
	raw, err := json.Marshal(arguments)
	if err != nil {
		return fmt.Errorf("encode the arguments: %w", err)
	}
	bin, err := opts.F.MCPBinary()
	if err != nil {
		return err
	}
	// --flag=value: a value that starts with "-" stays a value.
	argv := []string{"call", "--level=" + opts.Level, "--timeout=" + opts.Timeout.String(), "--args=" + string(raw)}
	if opts.Instance != "" {
		argv = append(argv, "--instance="+opts.Instance)
	}
	if opts.JSON {
		argv = append(argv, "--json")
	}
	// After "--": a tool name is never read as a flag.
	argv = append(argv, "--", opts.Tool)
	// A little beyond stem-mcp's own timeout, so its message wins.
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv...)
	ios := opts.F.IOStreams
	cmd.Stdout, cmd.Stderr = ios.Out, ios.ErrOut
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return &cmdutil.ExitError{Code: ee.ExitCode()}
		}
		return fmt.Errorf("run %s call: %w", bin, err)
	}
	return nil
}
