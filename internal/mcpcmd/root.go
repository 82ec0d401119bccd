// Package mcpcmd is stem-mcp's command tree: serve (MCP on stdio), gate (the
// SSH forced command) and gdb-bridge (run inside containers). It must stay
// light: stem-mcp starts once per SSH connection, so nothing here may pull in
// the Podman bindings.
package mcpcmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpserver"
)

// NewCmdRoot builds stem-mcp's root command.
func NewCmdRoot(ios *iostreams.IOStreams, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "stem-mcp <command>",
		Short: "MCP server over a student's tmux, Neovim and gdb, at a fixed access level",
		Long: `stem-mcp serves MCP on stdio. Its access level (observe, assist or full) is fixed
by the command line that starts it (the SSH forced command or the local agent
configuration), never by the client. Lower levels are separate allowlists of tools.`,
		Example: `  stem-mcp serve --level observe
  stem-mcp serve --level assist --instance hazard3-sim-inf-bss-t4
  stem-mcp tools --level assist`,
		Version:       mcpserver.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.AddCommand(newCmdServe(ios, getenv), newCmdTools(ios), newCmdGDBBridge(ios), newCmdGate(ios, getenv))
	root.AddCommand(newCmdAgentRelay(ios, getenv), newCmdCall(ios), newCmdAgentNet(), newCmdAgentMCP(ios), newCmdClass(ios, getenv))
	return root
}

func newCmdServe(ios *iostreams.IOStreams, getenv func(string) string) *cobra.Command {
	var level, instance, agentID string
	var approvalTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve --level observe|assist|full [--instance NAME] [--agent ID]",
		Short: "Serve MCP on stdin/stdout",
		Long: `Serve MCP on stdin/stdout for the selected instance (the target of
$XDG_RUNTIME_DIR/stem/mcp-selected/current, switched with ` + "`stemctl mcp select`" + `),
or for a fixed instance with --instance. Before every call the server re-checks
that it talks to the verified instance; a re-created container's old sockets are
refused. Every session and every effectful call is written to the audit log,
with the agent id given by --agent (stemctl agent start passes it).`,
		Example: `  stem-mcp serve --level observe
  stem-mcp serve --level full --instance native-amd64-demo-hello-t1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := levels.Parse(level)
			if err != nil {
				return cmdutil.FlagErrorf("--level: %v", err)
			}
			if agentID != "" && !agentstore.ValidID(agentID) {
				return cmdutil.FlagErrorf("--agent %q: want an agent id as `stemctl agent list` shows it (6 hex digits)", agentID)
			}
			tuneGC()
			oneProc(getenv)
			return mcpserver.Serve(cmd.Context(), mcpserver.Options{
				Level: l, Instance: instance,
				Identity: mcpserver.Identity{Account: cmdutil.LocalAccount(), Agent: agentID},
				In:       ios.In, Out: ios.Out, ErrOut: ios.ErrOut, Getenv: getenv,
				ApprovalTimeout: approvalTimeout,
			})
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "access level: observe, assist or full (required)")
	cmd.Flags().StringVar(&instance, "instance", "", "serve this instance instead of following the selection")
	cmd.Flags().StringVar(&agentID, "agent", "", "agent id to record in the audit log")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", time.Minute, "how long a call the task's policy lists in approve waits for the student's answer")
	cmd.MarkFlagRequired("level")
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed(levels.Names()...))
	return cmd
}

func newCmdTools(ios *iostreams.IOStreams) *cobra.Command {
	var level string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "tools --level observe|assist|full",
		Short:   "List the tools a server at a level exposes",
		Example: `  stem-mcp tools --level assist --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := levels.Parse(level)
			if err != nil {
				return cmdutil.FlagErrorf("--level: %v", err)
			}
			names := mcpserver.ToolNames(l)
			if asJSON {
				return cmdutil.WriteJSON(ios.Out, names)
			}
			for _, n := range names {
				fmt.Fprintln(ios.Out, n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "access level: observe, assist or full (required)")
	cmd.MarkFlagRequired("level")
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed(levels.Names()...))
	cmdutil.AddJSONFlag(cmd, &asJSON)
	return cmd
}

// tuneGC trades a little memory for latency: a session's heap is small and
// mostly short-lived result buffers, so collecting at 4x growth instead of
// 2x cut a 1,000-line buffer read by a third. The soft limit brings the
// default pace back if the heap ever grows large.
func tuneGC() {
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(256 << 20)
}

// oneProc runs a session's Go code on one processor, unless GOMAXPROCS
// says otherwise. A session serves one client, mostly a call at a time,
// and its work is waiting on pipes: with a second processor idle, every
// hand-over between goroutines woke another thread to look for work and
// put it back to sleep (futex and epoll calls, each a trap to the
// hypervisor on a virtual machine). On one, a pane_capture cost about a
// seventh less CPU and time, and a 1,000-line buffer read no more time.
func oneProc(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
