package access

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// ListOptions are `access list`'s inputs.
type ListOptions struct {
	F              *cmdutil.Factory
	AuthorizedKeys string
	JSON           bool
}

// NewCmdList builds `access list`.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{F: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the grants on this account",
		Long: `Show every grant: name, level, allowed instances, from= patterns, expiry, key
fingerprint, and whether its authorized_keys line is in place.`,
		Example: `  stemctl access list
  stemctl access list --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunList),
	}
	addKeysFlag(cmd, &opts.AuthorizedKeys)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunList prints the grants.
func RunList(ctx context.Context, opts *ListOptions) error {
	m, err := manager(opts.F, opts.AuthorizedKeys, false)
	if err != nil {
		return err
	}
	list, err := m.List(ctx)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if list == nil {
			list = []access.GrantStatus{}
		}
		return cmdutil.WriteJSON(out, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(out, "no grants (add one with `stemctl access grant`)")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tLEVEL\tINSTANCES\tFROM\tEXPIRES\tKEY\tLINE")
	for _, g := range list {
		inst := strings.Join(g.Instances, ",")
		if inst == "" {
			inst = "*"
		}
		from := g.From
		if from == "" {
			from = "-"
		}
		exp := "-"
		if !g.Expires.IsZero() {
			exp = g.Expires.Local().Format("2006-01-02 15:04")
			if g.Expired {
				exp += " (expired)"
			}
		}
		line := "ok"
		switch {
		case g.Lines == 0:
			line = "missing"
		case g.Lines > 1:
			line = fmt.Sprintf("%d lines", g.Lines)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, g.ID, g.Level, inst, from, exp, g.KeyFP, line)
	}
	return tw.Flush()
}

// RevokeOptions are `access revoke`'s inputs.
type RevokeOptions struct {
	F              *cmdutil.Factory
	Ref            string
	AuthorizedKeys string
	JSON           bool
}

// NewCmdRevoke builds `access revoke`.
func NewCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{F: f}
	cmd := &cobra.Command{
		Use:   "revoke NAME|ID",
		Short: "Remove a grant and its authorized_keys line",
		Long: `Remove the grant and the authorized_keys line that forces it; every other line
stays byte for byte. New connections with the key are refused at once, and a
session already open ends within about 2 seconds (the gate re-reads its grant
while it serves).`,
		Example: `  stemctl access revoke kowalski
  stemctl access revoke g3f9a0c1d2e4b5a67`,
		Args: cmdutil.ExactArgs(1, "NAME|ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, RunRevoke)
		},
	}
	addKeysFlag(cmd, &opts.AuthorizedKeys)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunRevoke revokes.
func RunRevoke(ctx context.Context, opts *RevokeOptions) error {
	m, err := manager(opts.F, opts.AuthorizedKeys, false)
	if err != nil {
		return err
	}
	g, n, err := m.Revoke(ctx, opts.Ref)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		return cmdutil.WriteJSON(out, struct {
			access.Grant
			LinesRemoved int `json:"lines_removed"`
		}{g, n})
	}
	fmt.Fprintf(out, "revoked %s (%s): removed %d line(s) from %s\n", g.Name, g.ID, n, g.AuthorizedKeys)
	if n == 0 {
		fmt.Fprintln(out, "(its line was already gone)")
	}
	return nil
}

// CheckOptions are `access check`'s inputs.
type CheckOptions struct {
	F              *cmdutil.Factory
	AuthorizedKeys string
	JSON           bool
	Now            func() time.Time
}

// NewCmdCheck builds `access check`.
func NewCmdCheck(f *cmdutil.Factory, runF func(context.Context, *CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{F: f}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Compare authorized_keys with the grants and report anything that does not match",
		Long: `Report stem lines in authorized_keys that match no grant (or whose key, options
or command differ from it), grants without a line, keys with more than one
grant, grant keys that also log in another way (for example with a shell), and
lines that cannot be read. Exit status 0 when all is consistent, 1 otherwise.`,
		Example: `  stemctl access check
  stemctl access check --json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunCheck),
	}
	addKeysFlag(cmd, &opts.AuthorizedKeys)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunCheck checks.
func RunCheck(ctx context.Context, opts *CheckOptions) error {
	m, err := manager(opts.F, opts.AuthorizedKeys, false)
	if err != nil {
		return err
	}
	m.Now = opts.Now
	rep, err := m.Check(ctx)
	if err != nil {
		return err
	}
	out := opts.F.IOStreams.Out
	if opts.JSON {
		if err := cmdutil.WriteJSON(out, rep); err != nil {
			return err
		}
	} else if rep.OK() {
		fmt.Fprintf(out, "ok: %d grant(s), %d stem line(s), all consistent\n", rep.Grants, rep.Lines)
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintln(out, p.String())
		}
	}
	if !rep.OK() {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

// KeygenOptions are `access keygen`'s inputs.
type KeygenOptions struct {
	F    *cmdutil.Factory
	Name string
	Out  string
	JSON bool
}

// NewCmdKeygen builds `access keygen`.
func NewCmdKeygen(f *cmdutil.Factory, runF func(context.Context, *KeygenOptions) error) *cobra.Command {
	opts := &KeygenOptions{F: f}
	cmd := &cobra.Command{
		Use:   "keygen --name NAME",
		Short: "Make a teacher's automation key pair (run on the teacher's machine)",
		Long: `Make a new ed25519 key pair for a teacher's agent: the private key (mode 0600,
no passphrase, so the agent's ssh can use it unattended) in ~/.ssh/stem_NAME
and the public key in ~/.ssh/stem_NAME.pub. The public line is printed: give it
(or the .pub file) to each student, who runs "stemctl access grant".

Keep this key apart from your ordinary SSH key: only the automation key goes
into MCP configurations, and a student's account refuses to grant a key that
already opens a shell there.`,
		Example: `  stemctl access keygen --name kowalski
  stemctl access keygen --name kowalski --out ~/keys/stem_kowalski`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunKeygen),
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the teacher's name (required); names the files and the key comment")
	cmd.Flags().StringVar(&opts.Out, "out", "", "private key path (default ~/.ssh/stem_NAME; the public key gets .pub)")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunKeygen makes the key pair.
func RunKeygen(_ context.Context, opts *KeygenOptions) error {
	if opts.Name == "" {
		return cmdutil.FlagErrorf("--name is required, e.g. --name kowalski")
	}
	if err := access.ValidName(opts.Name); err != nil {
		return cmdutil.FlagErrorf("--name: %v", err)
	}
	path := opts.Out
	if path == "" {
		d, err := opts.F.Dirs()
		if err != nil {
			return err
		}
		path = teacherkey.DefaultKeyPath(d.Home, opts.Name)
	}
	kp, err := teacherkey.Keygen(path, opts.Name)
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	if opts.JSON {
		return cmdutil.WriteJSON(ios.Out, kp)
	}
	fmt.Fprintf(ios.ErrOut, "wrote %s (private, 0600) and %s\nfingerprint %s\ngive this line to each student (stemctl access grant --name %s --key FILE.pub --level observe):\n",
		kp.PrivatePath, kp.PublicPath, kp.Fingerprint, opts.Name)
	fmt.Fprintln(ios.Out, kp.PublicLine)
	return nil
}
