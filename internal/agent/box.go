package agent

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/cliscreen"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/cardaccess"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/jsonwire"
	"github.com/stem-edu/stem/internal/mcpconfig"
)

// The host directories of a sandboxed agent, inside its agent directory.
const (
	boxConfDir = "box"  // -> sandbox.ConfDir, read-only
	boxRunDir  = "run"  // -> sandbox.RunDir: the host-served sockets
	boxHomeDir = "home" // -> sandbox.Home: the sandbox's own
)

// sandboxServer is the stem MCP server as the CLI in the sandbox starts
// it: a connection to the host's stem-mcp for this agent.
func sandboxServer() mcpconfig.Entry {
	return mcpconfig.Entry{Name: agentcli.ServerName, Command: sandbox.MCPBinary,
		Args: []string{"agent-mcp", "--sock", filepath.Join(sandbox.RunDir, sandbox.MCPSocket)}}
}

// sandboxProgram is the CLI's program in the sandbox and the host files
// to mount for it: a built-in CLI named without a path comes with the
// image; any other program is the host's file, mounted read-only at the
// same path (a static binary, or a script whose interpreter the image has).
func sandboxProgram(p agentcli.Provider, hostBin string) (string, []string) {
	if p.InImage() {
		return p.Command[0], nil
	}
	return hostBin, []string{hostBin}
}

// checkExecutable refuses a host program the sandbox could not execute
// (neither ELF nor a #! script): the failure would otherwise only show in
// the agent's window.
func checkExecutable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if string(head[:min(n, 2)]) == "#!" || string(head[:n]) == "\x7fELF" {
		return nil
	}
	return fmt.Errorf("%s: exec format error (not an ELF program or a #! script)", path)
}

// prepareBox lays out a window agent that runs in its sandbox: the
// adapter's files go to the read-only configuration directory, the
// CLI's first-run answers to its home, and the supervisor's spec says how
// to start the sandbox and what to serve it.
func (e *Env) prepareBox(req Request, p agentcli.Provider, hostBin, id, dir, sock string, started time.Time, pol *agentpolicy.Policy) (*Prepared, error) {
	rec := req.Target.Record
	conf, run, home, empty := filepath.Join(dir, boxConfDir), filepath.Join(dir, boxRunDir), filepath.Join(dir, boxHomeDir), filepath.Join(dir, "empty")
	for _, d := range []string{conf, run, home, empty} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	// The sandbox user (sandbox.User) must reach its files, the sockets'
	// directory and its home, and list the empty directory that hides the
	// card's project settings (a CLI that finds its settings directory
	// unreadable stops; an empty one it reads past). The agent directory
	// around them stays 0700.
	for _, d := range []string{conf, run, home, empty} {
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	hostServer := e.ServerEntry(rec.Instance, req.Level, id)
	server := sandboxServer()
	prog, programs := sandboxProgram(p, hostBin)
	for _, f := range programs {
		if err := checkExecutable(f); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	var login *agentcli.Carried
	if p.InImage() {
		var err error
		if login, err = e.signIn(p); err != nil {
			return nil, err
		}
	}
	lines := cliscreen.Known(p.Adapter)
	ctx := NewContext(AgentInfo{ID: id, Provider: p.Name, Level: req.Level.String(), Started: started, Sandboxed: true, EventLines: lines},
		rec, req.Target.Dir, req.Resolved, req.Level, append([]string{hostServer.Command}, hostServer.Args...))
	s := agentcli.Session{
		ID: id, Provider: p, Binary: prog, Level: req.Level.String(), Instance: rec.Instance,
		Server: server, Context: ctx.Markdown(),
		ContextFile: filepath.Join(sandbox.ConfDir, "context.md"), ContextJSON: filepath.Join(sandbox.ConfDir, "context.json"),
		MCPConfig: filepath.Join(sandbox.ConfDir, "mcp.json"), Dir: sandbox.ConfDir,
		CardPath: req.Resolved.CardPath, TaskDir: req.Resolved.TaskDir, Extra: req.Extra, Policy: pol, Sandboxed: true,
		HostLogin: login != nil,
	}
	l, err := agentcli.Plan(s)
	if err != nil {
		return nil, err
	}
	cj, err := jsonwire.Indent(ctx)
	if err != nil {
		return nil, err
	}
	l.Files["context.json"] = cj
	if err := writeFiles(conf, l.Files); err != nil {
		return nil, err
	}
	seeds, err := agentcli.HomeSeeds(p.Adapter, req.Resolved.CardPath, e.getenv)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(home, seeds); err != nil {
		return nil, err
	}
	if login != nil {
		if err := carryLogin(home, login); err != nil {
			return nil, err
		}
		e.progress("agent %s: signs in with a copy of %s", id, login.HostPath)
	}
	user, err := sandbox.Identify(os.Geteuid(), idmap.ForCaller)
	if err != nil {
		return nil, err
	}
	if err := giveSandbox(user, home, req.Resolved.CardPath, req.Level >= levels.Full); err != nil {
		return nil, err
	}
	env := map[string]string{"HOME": sandbox.Home, "DISABLE_AUTOUPDATER": "1"}
	for k, v := range sandbox.ProxyEnv() {
		env[k] = v
	}
	for k, v := range agentcli.SandboxEnv(p.Adapter) {
		env[k] = v
	}
	for k, v := range l.Env {
		env[k] = v
	}
	eg := p.Egress
	if len(eg) == 0 {
		eg = sandbox.DefaultEgress(p.Adapter)
	}
	eg = withLogin(eg, login)
	cs, err := sandbox.Spec(sandbox.Options{
		AgentID: id, Instance: rec.Instance,
		CardPath: req.Resolved.CardPath, CardWritable: req.Level >= levels.Full, ReadOnlyCardParts: sandbox.CardGit(req.Resolved.CardPath),
		WorkDir: req.Resolved.CardPath, HostRunDir: run, HostConfDir: conf, HostHome: home,
		HostMCPBinary: e.MCPBinary, Programs: programs, Masked: projectSettings(req.Resolved.CardPath), Empty: empty,
		User: user,
	})
	if err != nil {
		return nil, err
	}
	box := &runspec.BoxSpec{Container: cs, SocketUID: user.HostUID, Env: env, KeyVars: sandbox.KeyVars(p.Adapter), RunDir: run,
		MCP: append([]string{hostServer.Command}, hostServer.Args...), Egress: eg}
	return &Prepared{
		Session: s, Launch: l, Context: ctx, Box: box,
		Record: agentstore.Record{
			ID: id, Provider: p.Name, Adapter: p.Adapter, Instance: rec.Instance, ContainerID: rec.ContainerID,
			Level: req.Level.String(), Mode: agentstore.ModeWindow, Started: started, Socket: sock,
			WorkDir: req.Resolved.CardPath, Dir: dir, Context: filepath.Join(conf, "context.md"), Argv: l.Argv, MCP: hostServer,
			Sandbox: cs.Name, Egress: eg,
		},
	}, nil
}

// projectSettings are the CLIs' settings directories present in the card
// (only directories that exist: a mount point is never created in the
// card). The sandbox hides them; a symlink is hidden as well.
func projectSettings(card string) []string {
	var out []string
	for _, name := range []string{".claude", ".codex", ".gemini"} {
		p := filepath.Join(card, name)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// giveSandbox gives the sandbox user its home and, at full, the card:
// rootful by owner (the sandbox user is a host uid of its own, and the
// card stays root's), with ids of its own by ACL (internal/cardaccess),
// as the student's container gets the card.
func giveSandbox(u sandbox.Identity, home, card string, full bool) error {
	if u.IDMap == nil {
		if err := chownTree(home, u.UID, u.GID); err != nil {
			return fmt.Errorf("give the sandbox its home: %w", err)
		}
		return nil
	}
	g := cardaccess.Grant{Container: uint32(u.HostUID), Student: uint32(os.Geteuid())}
	if _, err := cardaccess.Card(home, g); err != nil {
		return fmt.Errorf("give the sandbox its home: %w", err)
	}
	if full {
		if _, err := cardaccess.Card(card, g); err != nil {
			return fmt.Errorf("give the sandbox the card: %w", err)
		}
	}
	return nil
}

// chownTree gives dir and everything in it to uid:gid (a no-op for the
// caller's own ids). Symlinks are changed, never followed.
func chownTree(dir string, uid, gid int) error {
	if uid == os.Getuid() && gid == os.Getgid() {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
