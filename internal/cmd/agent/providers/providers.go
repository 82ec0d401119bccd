// Package providers implements `stemctl agent providers`.
package providers

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are providers' inputs.
type Options struct {
	F    *cmdutil.Factory
	JSON bool
}

// Entry is one provider as listed.
type Entry struct {
	agentcli.Provider
	// Sandbox is where `agent start` runs the CLI: the agent image, for
	// a CLI it carries.
	Sandbox string `json:"sandbox,omitempty"`
	// Path is the program on the host (`--here`, and custom providers).
	Path    string `json:"path,omitempty"`
	Missing string `json:"missing,omitempty"`
}

// NewCmdProviders builds the command; runF replaces the run function in tests.
func NewCmdProviders(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "providers",
		Short: "List the agent providers, their adapters, and whether their programs are installed",
		Long: `List the providers ` + "`stemctl agent start`" + ` knows: codex, claude and gemini built in, custom,
and any defined in agents.toml in stem's config directory. A provider is a command
plus an adapter (codex, claude, gemini or custom) that knows how that CLI takes the
stem MCP server and the task context. Example agents.toml:

  [providers.custom]
  command = ["/usr/local/bin/my-agent", "--mcp-config", "{mcp_config}", "--context", "{context}"]

  [providers.codex]
  args = ["--model", "o4-mini"]       # appended to every codex agent

Placeholders for custom commands: ` + strings.Join(agentcli.Placeholders, " ") + `.`,
		Example: `  stemctl agent providers
  stemctl agent providers --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run lists the providers.
func Run(ctx context.Context, opts *Options) error {
	ps, err := agentutil.Providers(opts.F)
	if err != nil {
		return err
	}
	image := imageState(ctx, opts.F)
	var out []Entry
	for _, p := range ps.List() {
		e := Entry{Provider: p}
		path, err := "", error(nil)
		if len(p.Command) > 0 {
			path, err = p.Binary(opts.F.Getenv("PATH"))
		}
		switch {
		case len(p.Command) == 0:
			e.Missing = "no command configured (" + agentcli.ConfigFile + ")"
		case p.InImage():
			e.Sandbox = image
			e.Path = path // for --here; none needed otherwise
		case err != nil:
			e.Missing = err.Error()
		default:
			e.Path = path
		}
		out = append(out, e)
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, out)
	}
	tw := tabwriter.NewWriter(opts.F.IOStreams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tADAPTER\tPROGRAM")
	for _, e := range out {
		prog := e.Path
		switch {
		case e.Missing != "":
			prog = "missing: " + e.Missing
		case e.Sandbox != "" && e.Path != "":
			prog = e.Sandbox + "; --here: " + e.Path
		case e.Sandbox != "":
			prog = e.Sandbox
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.Adapter, prog)
	}
	if ps.Path != "" {
		fmt.Fprintf(tw, "\n(configuration: %s)\n", ps.Path)
	}
	return tw.Flush()
}

// imageState says whether the agent image that carries the built-in CLIs
// is there, and how to build it when it is not.
func imageState(ctx context.Context, f *cmdutil.Factory) string {
	in := "in the sandbox image " + sandbox.Image
	if f.Engine == nil {
		return in
	}
	eng, err := f.Engine(ctx)
	if err != nil {
		return in + " (Podman does not answer: " + err.Error() + ")"
	}
	if _, err := eng.ImageInspect(ctx, sandbox.Image); err != nil {
		return in + ", which is not built: run `make agent-image`"
	}
	return in
}
