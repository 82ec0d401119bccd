package teacher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/termtext"
)

// StatusOptions are `teacher status`'s inputs.
type StatusOptions struct {
	F       *cmdutil.Factory
	Target  targetFlags
	Timeout time.Duration
	JSON    bool
}

// NewCmdStatus builds `teacher status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{F: f}
	cmd := &cobra.Command{
		Use:   "status --host USER@HOST [--key FILE]",
		Short: "Ask a student's gate which instances this key may reach and whether they answer",
		Long: `Run the gate's status verb over SSH with the automation key: the grant's name
and level, the allowed instances, and whether each one's tmux and Neovim answer.`,
		Example: `  stemctl teacher status --host anna@lab-03 --key ~/.ssh/stem_kowalski
  stemctl teacher status --host anna@lab-03 --key ~/.ssh/stem_kowalski --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunStatus),
	}
	opts.Target.add(cmd)
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Second, "give up after this long")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunStatus runs `ssh ... status` and prints the answer.
func RunStatus(ctx context.Context, opts *StatusOptions) error {
	tg, notes, err := opts.Target.target(ctx, opts.F)
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	printNotes(ios.ErrOut, notes)
	args, err := tg.Command("status")
	if err != nil {
		return err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return fmt.Errorf("ssh %s status: no answer within %v", tg.Host, timeout)
		}
		if msg == "" {
			msg = err.Error()
		}
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if why := class.ExplainHostKey(tg.Host, tg.Port, code, msg); why != "" {
			return fmt.Errorf("ssh %s status: %s (ssh said: %s)", tg.Host, why, msg)
		}
		return fmt.Errorf("ssh %s status: %s", tg.Host, msg)
	}
	var st gatestatus.Status
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return fmt.Errorf("ssh %s status: the answer is not the gate's JSON (%v): is the key's forced command stem-mcp gate? It said (quoted): %q", tg.Host, err, termtext.Line(stdout.String(), 200))
	}
	if opts.JSON {
		return cmdutil.WriteJSON(ios.Out, st)
	}
	// The answer comes from the student's machine: each value is printed
	// as one clean line.
	clean := func(v string) string { return termtext.Line(v, 200) }
	// The host is the teacher's own; the rest is what the student's side
	// says, quoted.
	fmt.Fprintf(ios.Out, "%s: its gate says account %q, grant %q, level %q\n", tg.Host, clean(st.Account), clean(st.Grant), clean(st.Level))
	if len(st.Instances) == 0 {
		fmt.Fprintln(ios.Out, "no instances on this account")
		return nil
	}
	tw := tabwriter.NewWriter(ios.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tANSWERS\tTMUX\tNVIM\tCONTAINER")
	for _, is := range st.Instances {
		cid := is.ContainerID
		if len(cid) > 12 {
			cid = cid[:12]
		}
		if !is.Registered {
			cid = "(not started)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%s\n", clean(is.Instance), is.Answers, is.Tmux, is.Nvim, clean(cid))
	}
	return tw.Flush()
}
