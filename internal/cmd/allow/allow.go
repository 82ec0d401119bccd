// Package allow implements `stemctl allow` and `stemctl disallow`: the
// student's consents to assist-level agents, kept on the host
// (internal/consent) where nothing in the container can write them.
package allow

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/registry"
)

// Options are allow's and disallow's inputs.
type Options struct {
	F        *cmdutil.Factory
	Instance string
	Pane     string
	Edit     string
	Disallow bool
	JSON     bool
	// By names the host input (consent.By); empty: the process's stdin.
	By string
}

var paneRE = regexp.MustCompile(`^%[0-9]{1,9}$`)

// NewCmdAllow builds `stemctl allow`.
func NewCmdAllow(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, false)
}

// NewCmdDisallow builds `stemctl disallow`.
func NewCmdDisallow(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, true)
}

func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error, disallow bool) *cobra.Command {
	opts := &Options{F: f, Disallow: disallow}
	cmd := &cobra.Command{
		Use:   "allow [INSTANCE] [PANE | --edit FILE]",
		Short: "Let assist-level agents type into a pane or edit a file; without PANE, list what is allowed",
		Long: `Let assist-level agents (pane_send_keys, nvim_buffer_edit) type into one pane of
the instance's tmux, or edit one card file the manifest does not list as
editable. The permission is kept on the host, beside the registry: nothing that
runs in the container (its tmux options, its Neovim's buffer variables, the
card) can give it. A pane permission lasts while the container runs: a restart
or a re-creation starts with none. Without PANE or --edit, list the instance's
permissions. Every change is written to the audit log with the terminal it was
typed on.

PANE is a tmux pane id such as %3 (stemctl mcp call pane_list shows them);
FILE is card-relative, like the manifest's editable globs, or an absolute path
inside the card. Without INSTANCE, in a task's directory of the card, the
instance of that task.`,
		Example: `  stemctl allow native-amd64-demo-hello-t1
  stemctl allow native-amd64-demo-hello-t1 %3
  stemctl allow native-amd64-demo-hello-t1 --edit t1/notes.md
  stemctl allow native-amd64-demo-hello-t1 --json
  stemctl allow %3`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 {
				return cmdutil.FlagErrorf("%s takes [INSTANCE] [PANE] (got %d arguments)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		ValidArgsFunction: completeArgs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A pane id starts with %, an instance name never does.
			switch {
			case len(args) == 2:
				opts.Instance, opts.Pane = args[0], args[1]
			case len(args) == 1 && strings.HasPrefix(args[0], "%"):
				opts.Pane = args[0]
			case len(args) == 1:
				opts.Instance = args[0]
			}
			if err := opts.check(); err != nil {
				return err
			}
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	if disallow {
		cmd.Use = "disallow [INSTANCE] [PANE | --edit FILE]"
		cmd.Short = "Take back a pane or file permission given with `stemctl allow`"
		cmd.Long = `Take back a permission given with ` + "`stemctl allow`" + `: agents may no longer type
into PANE, or edit FILE unless the manifest lists it as editable. Without
INSTANCE, in a task's directory of the card, the instance of that task.`
		cmd.Example = `  stemctl disallow native-amd64-demo-hello-t1 %3
  stemctl disallow native-amd64-demo-hello-t1 --edit t1/notes.md`
	}
	cmd.Flags().StringVar(&opts.Edit, "edit", "", "a card `FILE` instead of a pane")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

func (o *Options) check() error {
	switch {
	case o.Pane != "" && o.Edit != "":
		return cmdutil.FlagErrorf("give a PANE or --edit FILE, not both")
	case o.Disallow && o.Pane == "" && o.Edit == "":
		return cmdutil.FlagErrorf("give the PANE or --edit FILE to take back (`%s` lists them)", strings.TrimSpace("stemctl allow "+o.Instance))
	case o.Pane != "" && !paneRE.MatchString(o.Pane):
		return cmdutil.FlagErrorf("%q is not a tmux pane id such as %%3 (stemctl mcp call pane_list shows them)", o.Pane)
	}
	return nil
}

// Listing is what `stemctl allow INSTANCE --json` prints.
type Listing struct {
	Instance    string         `json:"instance"`
	ContainerID string         `json:"container_id"`
	Panes       []consent.Pane `json:"panes"`
	Edits       []consent.Edit `json:"edits"`
	Change      string         `json:"change,omitempty"`
}

// Run lists, adds or takes back one permission.
func Run(ctx context.Context, opts *Options) error {
	rec, err := cmdutil.FindInstance(ctx, opts.F, opts.Instance)
	if err != nil {
		return err
	}
	st, err := cmdutil.Consents(opts.F)
	if err != nil {
		return err
	}
	by := opts.By
	if by == "" {
		verb := "allow"
		if opts.Disallow {
			verb = "disallow"
		}
		by = consent.By("stemctl "+verb, opts.F.IOStreams.In)
	}
	change := ""
	if opts.Pane != "" || opts.Edit != "" {
		if change, err = apply(ctx, st, rec, opts, by); err != nil {
			return err
		}
		if err := record(ctx, opts.F, rec, change, by); err != nil {
			return err
		}
	}
	e, err := st.Get(ctx, rec.Instance)
	if err != nil {
		return err
	}
	l := Listing{Instance: rec.Instance, ContainerID: rec.ContainerID, Panes: e.PanesOf(rec.ContainerID), Edits: e.Edits, Change: change}
	if l.Panes == nil {
		l.Panes = []consent.Pane{}
	}
	if l.Edits == nil {
		l.Edits = []consent.Edit{}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, l)
	}
	printListing(opts, l)
	return nil
}

// apply makes the change and says what it was.
func apply(ctx context.Context, st *consent.Store, rec registry.Record, opts *Options, by string) (string, error) {
	now := time.Now().UTC()
	if opts.Pane != "" {
		if rec.ContainerID == "" {
			return "", fmt.Errorf("instance %s has no container: start it with `stemctl up`", rec.Instance)
		}
		change := fmt.Sprintf("allow keys to pane %s (container %.12s)", opts.Pane, rec.ContainerID)
		if opts.Disallow {
			change = "dis" + change
		}
		return change, st.Update(ctx, rec.Instance, func(e *consent.Entry) error {
			out := e.Panes[:0]
			for _, p := range e.Panes {
				if p.ContainerID != rec.ContainerID || p.Pane != opts.Pane {
					out = append(out, p)
				}
			}
			e.Panes = out
			if !opts.Disallow {
				e.Panes = append(e.Panes, consent.Pane{ContainerID: rec.ContainerID, Pane: opts.Pane, Since: now, By: by})
			}
			return nil
		})
	}
	file, err := cardFile(rec.CardPath, opts.Edit)
	if err != nil {
		return "", err
	}
	change := "allow agents to edit " + file
	if opts.Disallow {
		change = "dis" + change
	}
	return change, st.Update(ctx, rec.Instance, func(e *consent.Entry) error {
		out := e.Edits[:0]
		for _, x := range e.Edits {
			if x.File != file {
				out = append(out, x)
			}
		}
		e.Edits = out
		if !opts.Disallow {
			e.Edits = append(e.Edits, consent.Edit{File: file, Since: now, By: by})
		}
		return nil
	})
}

// cardFile is FILE as a card-relative path.
func cardFile(cardPath, file string) (string, error) {
	if filepath.IsAbs(file) {
		rel, err := filepath.Rel(cardPath, filepath.Clean(file))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", cmdutil.FlagErrorf("%s is not inside the card %s", file, cardPath)
		}
		file = rel
	}
	rel, err := consent.CleanFile(file)
	if err != nil {
		return "", cmdutil.FlagErrorf("--edit: %v", err)
	}
	return rel, nil
}

// record audits the change with the input that made it. A change the
// audit log cannot take is still made (the log says why it failed on the
// next check), but the student is told.
func record(ctx context.Context, f *cmdutil.Factory, rec registry.Record, change, by string) error {
	log, err := f.Audit()
	if err == nil {
		_, err = log.Append(ctx, audit.Entry{Event: audit.Consent, Account: cmdutil.LocalAccount(), Instance: rec.Instance,
			ContainerID: rec.ContainerID, Result: "ok", Detail: change + "; by " + by})
	}
	if err != nil {
		return fmt.Errorf("%s was recorded, but not in the audit log: %w", change, err)
	}
	return nil
}

func printListing(opts *Options, l Listing) {
	out := opts.F.IOStreams.Out
	if l.Change != "" {
		fmt.Fprintf(out, "%s: %s\n", l.Instance, l.Change)
		return
	}
	if len(l.Panes) == 0 && len(l.Edits) == 0 {
		fmt.Fprintf(out, "%s: agents may type into no pane, and edit only the files the manifest lists\n", l.Instance)
		return
	}
	for _, p := range l.Panes {
		fmt.Fprintf(out, "pane %s\tsince %s\t%s\n", p.Pane, p.Since.Local().Format(time.DateTime), p.By)
	}
	for _, e := range l.Edits {
		fmt.Fprintf(out, "edit %s\tsince %s\t%s\n", e.File, e.Since.Local().Format(time.DateTime), e.By)
	}
}

// completeArgs completes the instance, then (for disallow, and as a
// reminder for allow) the panes allowed now.
func completeArgs(f *cmdutil.Factory) cobra.CompletionFunc {
	inst := cmdutil.CompleteInstance(f)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return inst(cmd, args, toComplete)
		}
		nofile := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 1 {
			return nil, nofile
		}
		reg, err := f.Registry()
		if err != nil {
			return nil, nofile
		}
		rec, err := reg.Find(cmd.Context(), args[0])
		if err != nil {
			return nil, nofile
		}
		st, err := cmdutil.Consents(f)
		if err != nil {
			return nil, nofile
		}
		e, err := st.Get(cmd.Context(), rec.Instance)
		if err != nil {
			return nil, nofile
		}
		var out []string
		for _, p := range e.PanesOf(rec.ContainerID) {
			if strings.HasPrefix(p.Pane, toComplete) {
				out = append(out, p.Pane+"\tallowed")
			}
		}
		return out, nofile
	}
}
