// Package verify implements `stemctl audit verify`.
package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// Options are verify's inputs.
type Options struct {
	F    *cmdutil.Factory
	File string
	JSON bool
}

// NewCmdVerify builds the command.
func NewCmdVerify(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain and report the first broken line",
		Long: `Each audit line carries the hash of the line before it. verify recomputes the
chain and names the first line that was edited, removed, reordered or is not
valid JSON. Exit status 0 when the chain holds, 4 when it is broken.

Each effectful MCP call writes an intent before it runs and its outcome
after. verify also lists intents with no outcome: calls still running, or
whose server ended during them (they may have acted). They do not break the
chain. Once a line is broken, stem-mcp refuses effectful calls and new
sessions (it cannot audit them): move the log and audit.head aside, keeping
them as the record, to start a new log.`,
		Example: `  stemctl audit verify
  stemctl audit verify --file /path/to/audit.jsonl --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, Run),
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "verify this file instead of the account's audit log")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run verifies.
func Run(ctx context.Context, opts *Options) error {
	path := opts.File
	var log *audit.Log
	if path == "" {
		var err error
		if log, err = opts.F.Audit(); err != nil {
			return err
		}
		path = log.Path()
	}
	var res audit.VerifyResult
	var err error
	if log == nil {
		// A missing --file is the caller's mistake.
		if res, err = audit.VerifyFile(path); err != nil {
			return err
		}
	} else {
		_, serr := os.Stat(path)
		if res, err = log.Verify(); err != nil {
			return err
		}
		// Nothing was audited on this account yet, unless the head says
		// otherwise (the log was deleted).
		if errors.Is(serr, os.ErrNotExist) && res.OK && !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.Out, "%s: no audit log yet\n", path)
			return nil
		}
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if err := cmdutil.WriteJSON(out, struct {
			File string `json:"file"`
			audit.VerifyResult
		}{path, res}); err != nil {
			return err
		}
	} else if res.OK {
		fmt.Fprintf(out, "%s: chain intact, %d lines\n", path, res.Lines)
		if res.Partial > 0 {
			fmt.Fprintf(out, "after them, %d bytes start an entry whose writer ended in the middle of writing it (never part of the chain): the next entry stem writes cuts them off and records a log_repair entry\n", res.Partial)
		}
		if res.UnfinishedCount > 0 {
			fmt.Fprintf(out, "%d effectful call(s) have an intent but no outcome (still running, or their server ended during them; they may have acted):\n", res.UnfinishedCount)
			for _, u := range res.Unfinished {
				where := ""
				if u.Instance != "" {
					where = " on " + u.Instance
				}
				fmt.Fprintf(out, "  line %d: seq %d, %s, %s%s, session %s\n", u.Line, u.Seq, u.Time.Local().Format("2006-01-02 15:04:05"), u.Tool, where, u.Session)
			}
			if n := res.UnfinishedCount - len(res.Unfinished); n > 0 {
				fmt.Fprintf(out, "  and %d more (stemctl audit show --unfinished)\n", n)
			}
		}
	} else {
		fmt.Fprintf(out, "%s: chain broken at line %d: %s\n", path, res.BrokenLine, res.Reason)
	}
	if log != nil && !opts.JSON {
		// A log stem cannot append to (a broken last line, say) stops
		// every audited action: say so, and how to start again.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := log.Check(cctx)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "stem-mcp refuses new sessions and effectful calls until this is fixed: %v\n", err)
		}
	}
	if !res.OK {
		return &cmdutil.ExitError{Code: 4}
	}
	return nil
}
