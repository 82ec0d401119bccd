package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/sandbox"
)

// signIn decides how a built-in CLI signs in in its sandbox, where a
// browser cannot reach it: with a key from the caller's environment (nil,
// nil: the key variables go in as before), else with the CLI's own
// sign-in done once on the host (its credential file, to be copied), else
// not at all (a NoKeyError saying both ways). A key wins: the login's
// longer-lived token then stays on the host.
func (e *Env) signIn(p agentcli.Provider) (*agentcli.Carried, error) {
	vars := sandbox.Credentials(p.Adapter)
	if len(vars) == 0 {
		return nil, nil
	}
	for _, v := range vars {
		if e.getenv(v) != "" {
			return nil, nil
		}
	}
	c, err := agentcli.ReadHostLogin(p.Adapter, e.Dirs.Home, e.getenv)
	if err != nil || c != nil {
		return c, err
	}
	nk := &agentcli.NoKeyError{Provider: p.Name, Vars: vars, Where: agentcli.KeyPage(p.Adapter)}
	if l, ok := agentcli.LoginOf(p.Adapter); ok {
		nk.Login, nk.LoginFile = l.Command, l.HostPath(e.Dirs.Home, e.getenv)
	}
	return nil, nk
}

// carryLogin writes the copy of c into the sandbox's home, before the
// sandbox exists: one new file (mode 0600, created, never through a link)
// in a directory of the home's own, not a mount of the host's directory,
// so the CLI sees none of the host's other files and what it writes
// (a refreshed token) never reaches the host.
func carryLogin(home string, c *agentcli.Carried) error {
	path := filepath.Join(home, c.Login.SandboxPath())
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("copy your sign-in into the sandbox: %w", err)
	}
	if _, err := f.Write(c.Data); err != nil {
		f.Close()
		return fmt.Errorf("copy your sign-in into the sandbox: %w", err)
	}
	return f.Close()
}

// withLogin is the sandbox's egress with the endpoints the carried login
// needs added (once each).
func withLogin(eg []string, c *agentcli.Carried) []string {
	if c == nil {
		return eg
	}
	out := append([]string(nil), eg...)
	for _, h := range c.Login.Egress {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
