// Package teacher implements `stemctl teacher`: on the teacher's machine,
// write agent CLIs' MCP configuration for reaching students' sessions over
// SSH with the automation key, and ask a student's gate for its status.
package teacher

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/sshtarget"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// NewCmdTeacher builds the group.
func NewCmdTeacher(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "teacher <command>",
		Short: "Connect a teacher's agent CLIs to students' sessions over SSH",
		Long: `Run these on the teacher's machine. Each student gets one MCP entry, named after
them, whose command is ssh with the automation key (never the ordinary key) to
the student's account, where the forced command stem-mcp gate serves MCP at the
level the student granted.`,
	}
	cmd.AddCommand(NewCmdConfig(f, nil), NewCmdStatus(f, nil), NewCmdDial(f, nil))
	return cmd
}

// targetFlags are shared by config and status.
type targetFlags struct {
	Host       string
	Key        string
	Port       int
	SSHOptions []string
	Force      bool
	Direct     bool
}

func (t *targetFlags) add(cmd *cobra.Command) {
	// A `word` in backquotes is what --help shows as the flag's value.
	cmd.Flags().StringVar(&t.Host, "host", "", "the student's account, `USER@HOST` (required)")
	cmd.Flags().StringVar(&t.Key, "key", "", "the automation private key `FILE` (default: the only ~/.ssh/stem_NAME made by stemctl access keygen)")
	cmd.Flags().IntVar(&t.Port, "port", 0, "SSH `PORT` on the student's machine")
	cmd.Flags().StringArrayVar(&t.SSHOptions, "ssh-option", nil, "extra ssh -o `KEY=VALUE` (repeatable), e.g. UserKnownHostsFile=/path")
	cmd.Flags().BoolVar(&t.Direct, "direct", false, "let ssh connect by itself instead of through stemctl teacher dial (slower handshake)")
	cmd.Flags().BoolVar(&t.Force, "force", false, "accept a key whose .pub lacks the stem-automation comment keygen writes (you vouch it is not your ordinary key)")
}

// target validates the flags; notes are advice and information for stderr.
func (t *targetFlags) target(ctx context.Context, f *cmdutil.Factory) (teacherkey.Target, []string, error) {
	if t.Host == "" {
		return teacherkey.Target{}, nil, cmdutil.FlagErrorf("--host is required: the student's USER@HOST")
	}
	d, err := f.Dirs()
	if err != nil {
		return teacherkey.Target{}, nil, err
	}
	return sshtarget.Resolve(ctx, sshtarget.Request{Host: t.Host, Key: t.Key, Port: t.Port, SSHOptions: t.SSHOptions,
		Force: t.Force, Direct: t.Direct, Home: d.Home, Self: f.Self})
}

func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// transientPath reports whether path is a binary `go run` built (in a
// go-build directory under $GOTMPDIR or the temporary directory).
func transientPath(path string) bool {
	return strings.Contains(path, "/go-build")
}
