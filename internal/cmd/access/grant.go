package access

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/levels"
)

// GrantOptions are `access grant`'s inputs.
type GrantOptions struct {
	F              *cmdutil.Factory
	Name           string
	KeyFile        string
	Level          string
	Instances      []string
	From           string
	Expires        string
	AuthorizedKeys string
	JSON           bool
	Now            func() time.Time
}

// NewCmdGrant builds `access grant`.
func NewCmdGrant(f *cmdutil.Factory, runF func(context.Context, *GrantOptions) error) *cobra.Command {
	opts := &GrantOptions{F: f}
	cmd := &cobra.Command{
		Use:   "grant --name TEACHER --key FILE.pub --level observe|assist|full",
		Short: "Let a teacher's automation key in, at one access level",
		Long: `Append one line to ~/.ssh/authorized_keys for the teacher's automation key:
"restrict" (no shell, no pty, no forwarding) plus a forced command that runs
stem-mcp gate for this grant, and from= / expiry-time= when given. The level and
the allowed instances are stored by stemctl, so the SSH client can never change
them.

Levels: observe (watch: nvim state, tmux panes, logs), assist (observe plus
debugger actions and the task's allowed edits; no terminal), full (full control
of nvim and tmux in the container, as you).

The teacher's ordinary key (the one that gives a shell) is refused: the
automation key must be a separate key, made with "stemctl access keygen".`,
		Example: `  stemctl access grant --name kowalski --key stem_kowalski.pub --level observe
  stemctl access grant --name kowalski --key - --level assist \
      --instance hazard3-sim-inf-bss-t4 --from 192.168.10.0/24 --expires 2030-06-30
  stemctl access grant --name lab-helper --key helper.pub --level full --expires 2h`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(opts, runF, RunGrant),
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the teacher's name for this grant (required)")
	cmd.Flags().StringVar(&opts.KeyFile, "key", "", "the teacher's automation public key file, or - for stdin (required)")
	cmd.Flags().StringVar(&opts.Level, "level", "", "observe, assist or full (required)")
	cmd.Flags().StringArrayVar(&opts.Instances, "instance", nil, "allow only this instance (repeat for more; default every instance)")
	cmd.RegisterFlagCompletionFunc("level", cmdutil.Fixed(levels.Names()...))
	cmd.RegisterFlagCompletionFunc("instance", cmdutil.CompleteInstance(f))
	cmd.Flags().StringVar(&opts.From, "from", "", "accept the key only from these hosts/addresses (sshd from= patterns)")
	cmd.Flags().StringVar(&opts.Expires, "expires", "", "end of the grant: 2025-06-30, \"2025-06-30 18:00\", RFC 3339, or 8h / 14d")
	addKeysFlag(cmd, &opts.AuthorizedKeys)
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunGrant adds the grant.
func RunGrant(ctx context.Context, opts *GrantOptions) error {
	switch {
	case opts.Name == "":
		return cmdutil.FlagErrorf("--name is required (the teacher's name, e.g. --name kowalski)")
	case opts.KeyFile == "":
		return cmdutil.FlagErrorf("--key is required: the teacher's automation public key (.pub), made with `stemctl access keygen`")
	case opts.Level == "":
		return cmdutil.FlagErrorf("--level is required: observe, assist or full")
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var expires time.Time
	if opts.Expires != "" {
		var err error
		if expires, err = access.ParseExpiry(opts.Expires, now()); err != nil {
			return cmdutil.FlagErrorf("--expires: %v", err)
		}
	}
	var pub []byte
	var err error
	if opts.KeyFile == "-" {
		pub, err = io.ReadAll(io.LimitReader(opts.F.IOStreams.In, 64<<10))
	} else {
		pub, err = os.ReadFile(opts.KeyFile)
	}
	if err != nil {
		return fmt.Errorf("read the teacher's public key: %w", err)
	}
	m, err := manager(opts.F, opts.AuthorizedKeys, true)
	if err != nil {
		return err
	}
	m.Now = now
	g, err := m.Grant(ctx, access.GrantRequest{
		Name: opts.Name, PublicKey: string(pub), Level: opts.Level, Instances: opts.Instances,
		From: opts.From, Expires: expires,
	})
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	if w := homeWarning(opts.F, opts.AuthorizedKeys); w != "" {
		fmt.Fprintln(ios.ErrOut, w)
	}
	if opts.JSON {
		return cmdutil.WriteJSON(ios.Out, g)
	}
	instances := "every instance"
	if len(g.Instances) > 0 {
		instances = strings.Join(g.Instances, ", ")
	}
	fmt.Fprintf(ios.Out, "granted %s (%s): level %s, %s\n", g.Name, g.ID, g.Level, instances)
	fmt.Fprintf(ios.Out, "key %s, line added to %s\n", g.KeyFP, g.AuthorizedKeys)
	if !g.Expires.IsZero() {
		fmt.Fprintf(ios.Out, "expires %s\n", g.Expires.Local().Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintf(ios.Out, "revoke with: stemctl access revoke %s\n", g.Name)
	return nil
}
