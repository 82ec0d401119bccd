// Package verify implements `stemctl audit verify`.
package verify

import (
	"context"
	"errors"
	"fmt"
	"os"

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
valid JSON. Exit status 0 when the chain holds, 4 when it is broken.`,
		Example: `  stemctl audit verify
  stemctl audit verify --file /path/to/audit.jsonl --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "verify this file instead of the account's audit log")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run verifies.
func Run(ctx context.Context, opts *Options) error {
	path := opts.File
	if path == "" {
		log, err := opts.F.Audit()
		if err != nil {
			return err
		}
		path = log.Path()
	}
	var res audit.VerifyResult
	f, err := os.Open(path)
	switch {
	case opts.File == "" && errors.Is(err, os.ErrNotExist):
		// Nothing was audited on this account yet, unless the head says
		// otherwise (the log was deleted). A missing --file, by contrast,
		// is the caller's mistake.
		res = audit.CheckHead(path, audit.VerifyResult{OK: true})
		if res.OK && !opts.JSON {
			fmt.Fprintf(opts.F.IOStreams.Out, "%s: no audit log yet\n", path)
			return nil
		}
	case err != nil:
		return fmt.Errorf("open audit log: %w", err)
	default:
		defer f.Close()
		if res, err = audit.Verify(f); err != nil {
			return err
		}
		res = audit.CheckHead(path, res)
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
	} else {
		fmt.Fprintf(out, "%s: chain broken at line %d: %s\n", path, res.BrokenLine, res.Reason)
	}
	if !res.OK {
		return &cmdutil.ExitError{Code: 4}
	}
	return nil
}
