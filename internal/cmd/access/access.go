// Package access implements `stemctl access`: on the student's account,
// grant, list, revoke and check teacher automation keys; on the teacher's
// machine, keygen makes such a key.
package access

import (
	"fmt"
	"os/user"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// NewCmdAccess builds the group.
func NewCmdAccess(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access <command>",
		Short: "Let a teacher's agent into this account over SSH with a restricted key",
		Long: `A teacher reaches a student's session with two separate keys: the ordinary key
(a full shell, for deliberate manual help; never put into a container, an MCP
configuration or a grant) and an automation key. The automation key's line in
~/.ssh/authorized_keys is "restrict" plus a forced command, stem-mcp gate, which
accepts only "mcp [INSTANCE]", "status" and "list" and serves MCP at the
grant's level (observe, assist or full). The level and the allowed instances are
stored by stemctl, never in what the SSH client sends.

On the teacher's machine:   stemctl access keygen --name kowalski
On the student's account:   stemctl access grant --name kowalski --key stem_kowalski.pub --level observe`,
	}
	cmd.AddCommand(
		NewCmdGrant(f, nil),
		NewCmdList(f, nil),
		NewCmdRevoke(f, nil),
		NewCmdCheck(f, nil),
		NewCmdKeygen(f, nil),
	)
	return cmd
}

// addKeysFlag adds --authorized-keys.
func addKeysFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "authorized-keys", "", "the authorized_keys file (default ~/.ssh/authorized_keys)")
}

// manager builds the access manager over the account's directories.
// withGate also resolves what a new line needs (stem-mcp's path and
// whether the forced command must name the config directory).
func manager(f *cmdutil.Factory, keysFile string, withGate bool) (*access.Manager, error) {
	d, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	store, err := access.OpenStore(d.Config)
	if err != nil {
		return nil, err
	}
	if keysFile == "" {
		keysFile = filepath.Join(d.Home, ".ssh", "authorized_keys")
	}
	m := &access.Manager{Store: store, AuthorizedKeys: keysFile}
	if u, err := user.Current(); err == nil {
		m.Account = u.Username
	}
	if f.Audit != nil {
		if m.Audit, err = f.Audit(); err != nil {
			return nil, err
		}
	}
	if !withGate {
		return m, nil
	}
	if m.MCPBinary, err = f.MCPBinary(); err != nil {
		return nil, err
	}
	if m.ConfigDirArg, err = access.ConfigDirArg(d.Config); err != nil {
		return nil, err
	}
	// sshd gives the gate no XDG variables: record where this account's
	// sockets, state and config are, as this stemctl sees them.
	m.Env = map[string]string{
		"XDG_RUNTIME_DIR": d.Runtime,
		"STEM_STATE_DIR":  d.State,
		"STEM_CONFIG_DIR": d.Config,
	}
	if ws := f.Getenv("STEM_WORKSPACE"); ws != "" {
		m.Env["STEM_WORKSPACE"] = ws
	}
	return m, nil
}

// homeWarning says when HOME is not the passwd home sshd uses.
func homeWarning(f *cmdutil.Factory, keysFlag string) string {
	if keysFlag != "" {
		return ""
	}
	d, err := f.Dirs()
	if err != nil {
		return ""
	}
	u, err := user.Current()
	if err != nil || filepath.Clean(u.HomeDir) == filepath.Clean(d.Home) {
		return ""
	}
	return fmt.Sprintf("note: HOME=%s is not your passwd home %s; sshd reads %s unless its AuthorizedKeysFile says otherwise (use --authorized-keys to choose)",
		d.Home, u.HomeDir, filepath.Join(u.HomeDir, ".ssh", "authorized_keys"))
}
