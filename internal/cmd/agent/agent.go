// Package agentcmd is `stemctl agent`: AI agents in the student's session.
package agentcmd

import (
	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmd/agent/attach"
	"github.com/stem-edu/stem/internal/cmd/agent/list"
	"github.com/stem-edu/stem/internal/cmd/agent/providers"
	"github.com/stem-edu/stem/internal/cmd/agent/run"
	"github.com/stem-edu/stem/internal/cmd/agent/start"
	"github.com/stem-edu/stem/internal/cmd/agent/stop"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// NewCmdAgent builds the command group.
func NewCmdAgent(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent <command>",
		Short: "Run AI agents (Codex, Claude, Gemini, ...) in a student's task session",
		Long: `An agent CLI runs in a sandbox: a container of its own beside the student's, with
no network but the model's API (through stem's egress proxy), signed in with the
API key from your environment or, without one, with the CLI's own sign-in done
once on the host (its one credential file is copied in). The built-in CLIs (codex, claude, gemini) come with the agent
image (make agent-image); nothing needs installing on the host. It works in the
student's session through stem-mcp, fixed to one instance and one access level, and
its terminal opens in a new window of the student's tmux, so the student sees and
talks to it. With --here the CLI runs on the host in your terminal instead (then it
must be on your PATH). See docs/agents.md.`,
		Example: `  stemctl agent start codex hazard3-sim inf bss 4
  stemctl agent attach claude --instance hazard3-sim-inf-bss-t4 --level observe
  stemctl agent list
  stemctl agent stop --instance hazard3-sim-inf-bss-t4`,
	}
	cmd.AddCommand(
		start.NewCmdStart(f, nil),
		attach.NewCmdAttach(f, nil),
		list.NewCmdList(f, nil),
		stop.NewCmdStop(f, nil),
		providers.NewCmdProviders(f, nil),
		run.NewCmdRun(f),
	)
	return cmd
}
