// Package show implements `stemctl audit show`.
package show

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmd/agent/agentutil"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/levels"
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
	// Unfinished shows only effectful calls whose intent has no outcome.
	Unfinished bool
	JSON       bool
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
  stemctl audit show --agent 3f9a1c
  stemctl audit show --unfinished`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Event != "" && !slices.Contains(audit.Events(), opts.Event) {
				return cmdutil.FlagErrorf("--event %q is not an audit event; choose one of %s", opts.Event, strings.Join(audit.Events(), ", "))
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Instance, "instance", "", "only this instance")
	fl.StringVar(&opts.Level, "level", "", "only this level (observe, assist, full)")
	fl.StringVar(&opts.Event, "event", "", "only this event ("+strings.Join(audit.Events(), ", ")+")")
	fl.StringVar(&opts.Account, "account", "", "only this account or grant")
	fl.StringVar(&opts.Agent, "agent", "", "only the MCP sessions of this agent (the id stemctl agent list shows)")
	fl.StringVar(&opts.Since, "since", "", "from this time: RFC 3339, \"2026-11-01 14:00\", a date (2026-11-01), or a duration ago (24h, 7d)")
	fl.StringVar(&opts.Until, "until", "", "up to this time (same forms as --since; a date includes that whole day)")
	fl.IntVar(&opts.Limit, "limit", 0, "only the newest N matches")
	fl.BoolVar(&opts.Unfinished, "unfinished", false, "only effectful calls with no outcome (still running, or their server ended during them: they may have acted)")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmd.RegisterFlagCompletionFunc("agent", agentutil.CompleteAgent(f))
	cmd.RegisterFlagCompletionFunc("level", cobra.FixedCompletions(levels.Names(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("event", cobra.FixedCompletions(audit.Events(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// ParseTime reads --since: an RFC 3339 time, "YYYY-MM-DD HH:MM" or
// "YYYY-MM-DDTHH:MM" (local time), a date (its first moment, local time), or
// a duration meaning that long ago ("90m", "24h", "7d"). Empty means no bound.
func ParseTime(s string, now time.Time) (time.Time, error) {
	return parseTime("--since", s, now, false)
}

// ParseUntil reads --until: the same forms, but a bare date means the end of
// that day, so --since 2026-11-01 --until 2026-11-01 is the whole day.
func ParseUntil(s string, now time.Time) (time.Time, error) {
	return parseTime("--until", s, now, true)
}

func parseTime(flag, s string, now time.Time, endOfDay bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	ago := func(d time.Duration) (time.Time, error) {
		if d < 0 {
			return time.Time{}, cmdutil.FlagErrorf("%s %q: a duration means that long ago and cannot be negative", flag, s)
		}
		return now.Add(-d), nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil {
			if days > 100*366 {
				return time.Time{}, cmdutil.FlagErrorf("%s %q: more than a century ago", flag, s)
			}
			return ago(time.Duration(days) * 24 * time.Hour)
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		return ago(d)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", s, now.Location()); err == nil {
		if endOfDay {
			return t.AddDate(0, 0, 1).Add(-time.Nanosecond), nil
		}
		return t, nil
	}
	return time.Time{}, cmdutil.FlagErrorf("%s: cannot read time %q: use RFC 3339 (2026-11-29T10:00:00Z), a local date and time (2026-11-29 10:00), a date (2026-11-29) or a duration ago (90m, 24h, 7d)", flag, s)
}

// Run prints the entries.
func Run(ctx context.Context, opts *Options) error {
	now := time.Now()
	since, err := ParseTime(opts.Since, now)
	if err != nil {
		return err
	}
	until, err := ParseUntil(opts.Until, now)
	if err != nil {
		return err
	}
	if !since.IsZero() && !until.IsZero() && since.After(until) {
		return cmdutil.FlagErrorf("--since %s is after --until %s: nothing can match", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	log, err := opts.F.Audit()
	if err != nil {
		return err
	}
	entries, err := log.Read(audit.Filter{Instance: opts.Instance, Level: opts.Level, Event: opts.Event, Account: opts.Account, Agent: opts.Agent, Since: since, Until: until, Unfinished: opts.Unfinished, Limit: opts.Limit})
	if err != nil {
		return err
	}
	unfinished := map[int64]bool{}
	if !opts.JSON && slices.ContainsFunc(entries, func(e audit.Entry) bool { return e.Event == audit.ToolIntent }) {
		if unfinished, err = log.UnfinishedSeqs(); err != nil {
			return err
		}
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05"), e.Event, acct, e.Level, e.Instance, e.Tool, result(e, unfinished))
	}
	return tw.Flush()
}

// result is the RESULT column: an intent says whether its outcome follows
// (the outcome's line names it), an outcome carries its intent and time.
func result(e audit.Entry, unfinished map[int64]bool) string {
	switch {
	case e.Event == audit.ToolIntent && unfinished[e.Seq]:
		return "no outcome (may have acted)"
	case e.Event == audit.ToolIntent:
		return "started"
	case e.Intent != 0 && e.Duration != "":
		return fmt.Sprintf("%s (intent %d, %s)", e.Result, e.Intent, e.Duration)
	case e.Intent != 0:
		return fmt.Sprintf("%s (intent %d)", e.Result, e.Intent)
	}
	return e.Result
}
