package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/jsonwire"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// Env is what starting and stopping agents needs from the account.
type Env struct {
	Dirs   xdg.Dirs
	Layout sockets.Layout
	Store  agentstore.Store
	// MCPBinary is the host's stem-mcp; Self is stemctl (the supervisor).
	MCPBinary string
	Self      string
	// Environ is the caller's environment: the agent inherits it (PATH,
	// credentials), plus stem's variables.
	Environ   []string
	Providers *agentcli.Providers
	// Progress gets one line per step (may be nil).
	Progress io.Writer
	// RemoveSandbox (may be nil) removes an agent's sandbox container by
	// name: Stop uses it when the supervisor did not (it was killed).
	RemoveSandbox func(ctx context.Context, name string) error
}

// Request asks for one agent on a verified instance.
type Request struct {
	Provider string
	Level    levels.Level
	Target   verify.Target
	Resolved *workspace.Resolved
	// Extra are the provider's own arguments (after --).
	Extra []string
	// Background keeps the student's tmux on its current window.
	Background bool
}

// Prepared is an agent ready to launch: its directory holds the context,
// the MCP configuration and the adapter's files.
type Prepared struct {
	Record  agentstore.Record
	Launch  agentcli.Launch
	Session agentcli.Session
	Context Context
	// Box is the sandbox a window agent runs in (nil with --here).
	Box *runspec.BoxSpec
}

func (e *Env) getenv(k string) string {
	for i := len(e.Environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(e.Environ[i], k+"="); ok {
			return v
		}
	}
	return ""
}

func (e *Env) progress(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// ServerEntry is the stem-mcp server an agent on instance gets: the host's
// stem-mcp, fixed to that instance and level, with the directories it needs
// spelled out (agent CLIs pass MCP servers a reduced environment). agentID
// (may be empty) goes to the audit log.
func (e *Env) ServerEntry(inst string, level levels.Level, agentID string) mcpconfig.Entry {
	env := map[string]string{
		"HOME":            e.Dirs.Home,
		"XDG_RUNTIME_DIR": e.Dirs.Runtime,
		"STEM_STATE_DIR":  e.Dirs.State,
		"STEM_CONFIG_DIR": e.Dirs.Config,
	}
	for _, k := range []string{"PATH", "CONTAINER_HOST", "CONTAINERS_CONF"} {
		if v := e.getenv(k); v != "" {
			env[k] = v
		}
	}
	args := []string{"serve", "--level", level.String(), "--instance", inst}
	if agentID != "" {
		args = append(args, "--agent", agentID)
	}
	return mcpconfig.Entry{Name: agentcli.ServerName, Command: e.MCPBinary, Args: args, Env: env}
}

// SocketPath is the agent terminal's socket in the container's socket
// directory, checked against the AF_UNIX length limit.
func SocketPath(dir sockets.Dir, id string) (string, error) {
	p := filepath.Join(dir.Path, sockets.AgentSocket(id))
	if len(p) >= sockets.MaxPath {
		return "", &sockets.PathTooLongError{Path: p, Len: len(p)}
	}
	return p, nil
}

// Check makes every refusal of Prepare that does not need the instance:
// an unknown provider, a missing program, the adapter's checks (the
// directory agents' files go to, a custom command's placeholders), and a
// built-in CLI in its sandbox with neither an API key nor a sign-in of
// its own on the host (signIn). Callers
// run it before they start a container, so that a refusal leaves nothing
// behind; the agent socket's length is covered by sockets.CheckLengths,
// which `up` runs. It returns the provider and its program's path on the
// host: none for a CLI the agent image carries when it runs in its
// sandbox (mode agentstore.ModeWindow), which needs nothing installed on the host.
func (e *Env) Check(name, mode string) (agentcli.Provider, string, error) {
	p, err := e.Providers.Get(name)
	if err != nil {
		return agentcli.Provider{}, "", err
	}
	bin := ""
	if mode != agentstore.ModeWindow || !p.InImage() {
		if bin, err = p.Binary(e.getenv("PATH")); err != nil {
			return agentcli.Provider{}, "", err
		}
	}
	if err := agentcli.Precheck(p, e.Store.Root); err != nil {
		return agentcli.Provider{}, "", err
	}
	if mode == agentstore.ModeWindow && p.InImage() {
		if _, err := e.signIn(p); err != nil {
			return agentcli.Provider{}, "", err
		}
	}
	return p, bin, nil
}

// Prepare creates the agent's directory and files. mode is agentstore.ModeWindow or
// agentstore.ModeHere. On error nothing is left behind.
func (e *Env) Prepare(req Request, mode string) (_ *Prepared, err error) {
	p, bin, err := e.Check(req.Provider, mode)
	if err != nil {
		return nil, err
	}
	pol, err := checkPolicy(req)
	if err != nil {
		return nil, err
	}
	rec := req.Target.Record
	id, dir, err := e.Store.Create()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Store.Remove(id)
		}
	}()
	sock := ""
	if mode == agentstore.ModeWindow {
		if sock, err = SocketPath(req.Target.Dir, id); err != nil {
			return nil, err
		}
	}
	started := time.Now().UTC()
	if mode == agentstore.ModeWindow {
		return e.prepareBox(req, p, bin, id, dir, sock, started, pol)
	}
	// --here: the CLI runs on the host, in an empty directory of its own,
	// so it reads no project settings, hooks or instructions from the card
	// (the container can write them there).
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	server := e.ServerEntry(rec.Instance, req.Level, id)
	ctx := NewContext(AgentInfo{ID: id, Provider: p.Name, Level: req.Level.String(), Started: started},
		rec, req.Target.Dir, req.Resolved, req.Level, append([]string{server.Command}, server.Args...))
	s := agentcli.Session{
		ID: id, Provider: p, Binary: bin, Level: req.Level.String(), Instance: rec.Instance,
		Server: server, Context: ctx.Markdown(),
		ContextFile: filepath.Join(dir, "context.md"), ContextJSON: filepath.Join(dir, "context.json"),
		MCPConfig: filepath.Join(dir, "mcp.json"), Dir: dir,
		CardPath: req.Resolved.CardPath, TaskDir: req.Resolved.TaskDir, Extra: req.Extra, Policy: pol,
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
	for name, data := range l.Files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return &Prepared{
		Session: s, Launch: l, Context: ctx,
		Record: agentstore.Record{
			ID: id, Provider: p.Name, Adapter: p.Adapter, Instance: rec.Instance, ContainerID: rec.ContainerID,
			Level: req.Level.String(), Mode: mode, Started: started, Socket: sock,
			WorkDir: work, Dir: dir, Context: s.ContextFile, Argv: l.Argv, MCP: server,
		},
	}, nil
}
