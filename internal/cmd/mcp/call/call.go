// Package mcpcall implements `stemctl mcp call`: a small MCP client that
// starts stem-mcp at a level and calls one tool, so a student or teacher can
// see exactly what an agent would see, and scripts can use stem-mcp too.
package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Level, "level", "observe", "access level of the stem-mcp started for the call")
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed("observe", "assist", "full"))
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

// Run starts stem-mcp, calls the tool and prints the result.
func Run(ctx context.Context, opts *Options) error {
	arguments, err := ParseArgs(opts.Args, opts.RawJSON)
	if err != nil {
		return err
	}
	bin, err := opts.F.MCPBinary()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	argv := []string{"serve", "--level", opts.Level}
	if opts.Instance != "" {
		argv = append(argv, "--instance", opts.Instance)
	}
	c, err := client.NewStdioMCPClient(bin, os.Environ(), argv...)
	if err != nil {
		return fmt.Errorf("start stem-mcp: %w", err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "stemctl mcp call", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("MCP initialize: %w", err)
	}
	out := opts.F.IOStreams.Out
	if uri, ok := strings.CutPrefix(opts.Tool, "resource:"); ok {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			return err
		}
		if opts.JSON {
			return cmdutil.WriteJSON(out, res)
		}
		for _, rc := range res.Contents {
			if t, ok := rc.(mcp.TextResourceContents); ok {
				fmt.Fprintln(out, t.Text)
			}
		}
		return nil
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = opts.Tool
	req.Params.Arguments = arguments
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if opts.JSON {
		if err := cmdutil.WriteJSON(out, res); err != nil {
			return err
		}
	} else {
		printResult(out, res)
	}
	if res.IsError {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

func printResult(w interface{ Write([]byte) (int, error) }, res *mcp.CallToolResult) {
	if res.StructuredContent != nil {
		data, err := json.MarshalIndent(res.StructuredContent, "", "  ")
		if err == nil {
			fmt.Fprintln(w, string(data))
			return
		}
	}
	for _, c := range res.Content {
		t, ok := c.(mcp.TextContent)
		if !ok {
			continue
		}
		// Tool results are JSON text: indent them for reading.
		var buf bytes.Buffer
		if json.Indent(&buf, []byte(t.Text), "", "  ") == nil {
			fmt.Fprintln(w, buf.String())
		} else {
			fmt.Fprintln(w, t.Text)
		}
	}
}
