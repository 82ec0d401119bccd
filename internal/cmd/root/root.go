// Package root assembles stemctl's command tree. Each subcommand lives in
// its own package under internal/cmd with an options struct and a run
// function (the GitHub CLI's layout), so tests drive them without a process.
package root

import (
	"strings"

	"github.com/spf13/cobra"

	accesscmd "github.com/stem-edu/stem/internal/cmd/access"
	agentcmd "github.com/stem-edu/stem/internal/cmd/agent"
	"github.com/stem-edu/stem/internal/cmd/approvals"
	"github.com/stem-edu/stem/internal/cmd/attach"
	auditcmd "github.com/stem-edu/stem/internal/cmd/audit"
	classcmd "github.com/stem-edu/stem/internal/cmd/class"
	"github.com/stem-edu/stem/internal/cmd/commit"
	"github.com/stem-edu/stem/internal/cmd/debug"
	"github.com/stem-edu/stem/internal/cmd/down"
	execcmd "github.com/stem-edu/stem/internal/cmd/exec"
	"github.com/stem-edu/stem/internal/cmd/list"
	"github.com/stem-edu/stem/internal/cmd/mcp"
	"github.com/stem-edu/stem/internal/cmd/rm"
	"github.com/stem-edu/stem/internal/cmd/status"
	"github.com/stem-edu/stem/internal/cmd/task"
	"github.com/stem-edu/stem/internal/cmd/teacher"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Version is set by the linker (-X) for release builds.
var Version = "dev"

// NewCmdRoot returns the stemctl root command.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stemctl <command>",
		Short: "Run student tasks in per-task containers and let agents help in the same session",
		Long: `stemctl puts each student task (series, card, task) in its own Podman container
with tmux, Neovim and a debugger, and connects AI agents and a teacher's agent to
that same session through stem-mcp.`,
		Example: `  stemctl up hazard3-sim inf bss 4
  stemctl attach hazard3-sim-inf-bss-t4
  stemctl debug hazard3-sim inf bss 4
  stemctl mcp select hazard3-sim-inf-bss-t4
  stemctl agent start codex hazard3-sim inf bss 4`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(f.IOStreams.In)
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	cmd.CompletionOptions.HiddenDefaultCmd = false
	// Flag parsing mistakes are usage errors (exit 2, usage line) like
	// wrong arguments; subcommands inherit this.
	cmd.SetFlagErrorFunc(flagError)
	// One line per top-level command.
	cmd.AddCommand(
		up.NewCmdUp(f, nil),
		list.NewCmdList(f, nil),
		status.NewCmdStatus(f, nil),
		attach.NewCmdAttach(f, nil),
		execcmd.NewCmdExec(f, nil),
		down.NewCmdDown(f, nil),
		rm.NewCmdRm(f, nil),
		task.NewCmd(f, task.Build, nil),
		task.NewCmd(f, task.Test, nil),
		task.NewCmd(f, task.Run, nil),
		task.NewCmd(f, task.Deploy, nil),
		commit.NewCmdCommit(f, nil),
		debug.NewCmdDebug(f, nil),
		mcp.NewCmdMCP(f),
		auditcmd.NewCmdAudit(f),
		accesscmd.NewCmdAccess(f),
		teacher.NewCmdTeacher(f),
		classcmd.NewCmdClass(f),
		agentcmd.NewCmdAgent(f),
		approvals.NewCmdApprovals(f, nil),
	)
	return cmd
}

// flagError turns pflag's error into a usage error. An unknown flag is most
// often a positional value that starts with '-': say how to pass one.
func flagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand flag") {
		return cmdutil.FlagErrorf("%s (see --help; an argument that starts with '-' goes after --)", msg)
	}
	// strconv's wording is Go's, not the user's: say what the flag wants.
	msg = strings.NewReplacer(
		"strconv.ParseBool: parsing", "want true or false, not",
		"strconv.ParseInt: parsing", "want a whole number, not",
		"strconv.ParseUint: parsing", "want a whole number, not",
		"strconv.ParseFloat: parsing", "want a number, not",
		": invalid syntax", "",
	).Replace(msg)
	return cmdutil.FlagErrorf("%s", msg)
}
