// Package show implements `stemctl audit show`.
package show

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are show's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Level    string
	Event    string
	Account  string
	Agent    string
	Since    string
	Until    string
	Limit    int
	JSON     bool
}

// NewCmdShow builds the command.
func NewCmdShow(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show audit entries, filtered by instance, level, event, account, agent and time",
		Example: `  stemctl audit show --instance hazard3-sim-inf-bss-t4
  stemctl audit show --level full --since 24h
  stemctl audit show --event refused --since 2026-11-01 --json
  stemctl audit show --agent 3f9a1c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Instance, "instance", "", "only this instance")
	fl.StringVar(&opts.Level, "level", "", "only this level (observe, assist, full)")
	fl.StringVar(&opts.Event, "event", "", "only this event (session_start, session_end, tool_call, refused, select, grant, revoke, agent)")
	fl.StringVar(&opts.Account, "account", "", "only this account or grant")
	fl.StringVar(&opts.Agent, "agent", "", "only the MCP sessions of this agent (id from `stemctl agent list`)")
	fl.StringVar(&opts.Since, "since", "", "from this time: RFC 3339, a date (2026-11-01), or a duration ago (24h)")
	fl.StringVar(&opts.Until, "until", "", "up to this time (same forms as --since)")
	fl.IntVar(&opts.Limit, "limit", 0, "only the newest N matches")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmd.RegisterFlagCompletionFunc("agent", agentutil.CompleteAgent(f))
	cmd.RegisterFlagCompletionFunc("level", cobra.FixedCompletions([]string{"observe", "assist", "full"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("event", cobra.FixedCompletions([]string{
		audit.SessionStart, audit.SessionEnd, audit.ToolCall, audit.Refused, audit.Select, audit.Grant, audit.Revoke, audit.Agent,
	}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// ParseTime accepts RFC 3339, a date, or a duration meaning "that long ago".
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, cmdutil.FlagErrorf("cannot read time %q: use RFC 3339 (2026-11-29T10:00:00Z), a date (2026-11-29) or a duration ago (24h)", s)
}

// Run prints the entries.
func Run(ctx context.Context, opts *Options) error {
	now := time.Now()
	since, err := ParseTime(opts.Since, now)
	if err != nil {
		return err
	}
	until, err := ParseTime(opts.Until, now)
	if err != nil {
		return err
	}
	log, err := opts.F.Audit()
	if err != nil {
		return err
	}
	entries, err := log.Read(audit.Filter{Instance: opts.Instance, Level: opts.Level, Event: opts.Event, Account: opts.Account, Agent: opts.Agent, Since: since, Until: until, Limit: opts.Limit})
	if err != nil {
		return err
	}
	if opts.JSON {
		if entries == nil {
			entries = []audit.Entry{}
		}
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, entries)
	}
	tw := tabwriter.NewWriter(opts.F.IOStreams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tEVENT\tACCOUNT\tLEVEL\tINSTANCE\tTOOL\tRESULT")
	for _, e := range entries {
		acct := e.Account
		if e.Agent != "" {
			acct += " (agent " + e.Agent + ")"
		}
		if e.Grant != "" {
			acct += " (grant " + e.Grant + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05"), e.Event, acct, e.Level, e.Instance, e.Tool, e.Result)
	}
	return tw.Flush()
}
