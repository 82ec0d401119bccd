package mcpcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// newCmdCall is the MCP client behind `stemctl mcp call`. It lives here so
// stemctl does not link mcp-go (whose client pulls in its server and a JSON
// Schema library that costs every stemctl start ~5 ms of initialisation).
func newCmdCall(ios *iostreams.IOStreams) *cobra.Command {
	var level, instance, args string
	var timeout time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "call --level L [--instance NAME] [--args JSON] TOOL|resource:URI",
		Short: "Call one tool through a real MCP session with stem-mcp serve",
		Long: `Start "stem-mcp serve" at the level (as an agent's configuration would), do the
MCP handshake with mcp-go's client, call TOOL with the --args object (or read a
resource), and print the result; exit status 1 when the tool reports an error.
"stemctl mcp call" runs this with its NAME=VALUE arguments turned into --args.`,
		Example: `  stem-mcp call --level observe session_status
  stem-mcp call --level observe --args '{"pane":"%0","start":-20}' pane_capture`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if _, err := levels.Parse(level); err != nil {
				return cmdutil.FlagErrorf("--level: %v", err)
			}
			arguments := map[string]any{}
			if args != "" {
				dec := json.NewDecoder(strings.NewReader(args))
				dec.UseNumber()
				err := dec.Decode(&arguments)
				if err == nil && dec.More() {
					err = fmt.Errorf("text after the object")
				}
				if err != nil || arguments == nil {
					return cmdutil.FlagErrorf("--args: want one JSON object (%v)", err)
				}
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the stem-mcp executable: %w", err)
			}
			serve := []string{"serve", "--level=" + level}
			if instance != "" {
				serve = append(serve, "--instance="+instance)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return call(ctx, ios.Out, self, serve, pos[0], arguments, asJSON)
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "access level of the server started for the call: observe, assist or full (required)")
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed(levels.Names()...))
	cmd.Flags().StringVar(&instance, "instance", "", "a fixed instance instead of the selection")
	cmd.Flags().StringVar(&args, "args", "", "the tool's arguments as one JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long")
	cmd.MarkFlagRequired("level")
	cmdutil.AddJSONFlag(cmd, &asJSON)
	return cmd
}

func call(ctx context.Context, out io.Writer, bin string, serve []string, tool string, arguments map[string]any, asJSON bool) error {
	c, err := client.NewStdioMCPClient(bin, os.Environ(), serve...)
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
	if uri, ok := strings.CutPrefix(tool, "resource:"); ok {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			return err
		}
		if asJSON {
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
	req.Params.Name = tool
	req.Params.Arguments = arguments
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
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

func printResult(w io.Writer, res *mcp.CallToolResult) {
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
