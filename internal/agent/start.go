package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/jsonwire"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/procstat"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/tmux"
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
	Box *BoxSpec
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

// StartWindow starts the supervisor for a prepared agent, opens its window
// in the student's tmux and waits until the provider runs.
func (e *Env) StartWindow(ctx context.Context, p *Prepared, background bool, tmuxDial func(context.Context, registry.Record) (*tmux.Client, error), rec registry.Record) (_ agentstore.Record, err error) {
	r := p.Record
	spec := Spec{ID: r.ID, Provider: r.Provider, Adapter: r.Adapter, Instance: r.Instance, Argv: p.Launch.Argv, Env: p.Launch.Env,
		WorkDir: r.WorkDir, Socket: r.Socket, RelayTimeout: 15 * time.Second, Sandbox: p.Box}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(r.Dir, SpecFile), data, 0o600); err != nil {
		return r, err
	}
	if err := agentstore.MkdirPrivate(e.Store.LogDir); err != nil {
		return r, err
	}
	r.Log = filepath.Join(e.Store.LogDir, r.ID+".log")
	logf, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return r, err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return r, err
	}
	defer pr.Close()
	cmd := exec.Command(e.Self, "agent", "run", "--dir", r.Dir, "--ready-fd", "3")
	cmd.Env = e.Environ
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return r, fmt.Errorf("start the agent supervisor (%s agent run): %w", e.Self, err)
	}
	pw.Close()
	r.PID = cmd.Process.Pid
	r.PIDStart, _ = procstat.Start(r.PID)
	// Reap it if it ends while this process lives; it outlives stemctl
	// otherwise (its own session, reparented).
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	var tc *tmux.Client
	defer func() {
		if err != nil {
			// A failure or Ctrl-C (ctx done): nothing of the agent stays.
			syscall.Kill(r.PID, syscall.SIGTERM)
			if tc != nil && r.Pane != "" {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				tc.KillPane(cctx, tmux.PaneID(r.Pane))
				cancel()
			}
			// On SIGTERM the supervisor finishes creating the sandbox it
			// began and removes it: it is given the time to, since a
			// create cut off may still complete in Podman after a kill.
			grace := 5 * time.Second
			if p.Box != nil {
				grace = StartTimeout
			}
			select {
			case <-waited:
			case <-time.After(grace):
				syscall.Kill(r.PID, syscall.SIGKILL)
				<-waited
			}
			// A supervisor killed removed neither its socket nor its sandbox.
			agentstore.RemoveSocket(r)
			if p.Box != nil && e.RemoveSandbox != nil {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				if rerr := e.RemoveSandbox(cctx, p.Box.Container.Name); rerr != nil {
					err = fmt.Errorf("%w (and its sandbox %s could not be removed: %v)", err, p.Box.Container.Name, rerr)
				}
				cancel()
			}
		}
		if tc != nil {
			tc.Close()
		}
	}()
	lines := readLines(pr)
	if err := expect(ctx, lines, readyListening, 10*time.Second, r.Log); err != nil {
		return r, err
	}
	e.progress("agent %s: supervisor %d listening on %s", r.ID, r.PID, r.Socket)
	// The window's steps run to their end even on Ctrl-C, so that a
	// window opened is known and closed by the clean-up above.
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer tcancel()
	tc, err = tmuxDial(tctx, rec)
	if err != nil {
		return r, err
	}
	np, err := tc.NewWindow(tctx, tmux.NewWindowOptions{
		Name: r.Provider, Dir: p.Session.TaskDir, Select: !background,
		Argv: []string{instance.MCPMountPath, "agent-relay", "--sock", r.Socket},
	})
	if err != nil {
		return r, fmt.Errorf("open the agent's window: %w", err)
	}
	r.Window, r.Pane = string(np.Window), string(np.Pane)
	if err := tc.SetPaneOption(tctx, np.Pane, "@stem_role", "agent"); err != nil {
		return r, err
	}
	if err := tc.SetPaneOption(tctx, np.Pane, "@stem_agent", r.ID); err != nil {
		return r, err
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	wait := spec.RelayTimeout + 5*time.Second
	if spec.Sandbox != nil {
		wait += StartTimeout
	}
	line, err := expectPrefix(ctx, lines, readyStarted+" ", wait, r.Log)
	if err != nil {
		if text, cerr := tc.Capture(ctx, np.Pane, tmux.CaptureOptions{}); cerr == nil && strings.TrimSpace(text.Text) != "" {
			err = fmt.Errorf("%w\nthe agent's window shows:\n%s", err, strings.TrimSpace(text.Text))
		}
		return r, err
	}
	r.ProviderPID, _ = strconv.Atoi(strings.TrimPrefix(line, readyStarted+" "))
	if err := e.Store.Write(r); err != nil {
		return r, err
	}
	return r, nil
}

type lineOrErr struct {
	line string
	err  error
}

func readLines(r io.Reader) <-chan lineOrErr {
	ch := make(chan lineOrErr, 4)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- lineOrErr{line: sc.Text()}
		}
		ch <- lineOrErr{err: io.EOF}
	}()
	return ch
}

func expect(ctx context.Context, lines <-chan lineOrErr, want string, d time.Duration, log string) error {
	_, err := expectPrefix(ctx, lines, want, d, log)
	return err
}

func expectPrefix(ctx context.Context, lines <-chan lineOrErr, want string, d time.Duration, log string) (string, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok || l.err != nil {
				return "", fmt.Errorf("the agent supervisor ended early (its log: %s)", log)
			}
			if msg, isErr := strings.CutPrefix(l.line, readyError+" "); isErr {
				return "", fmt.Errorf("agent: %s (log: %s)", msg, log)
			}
			if strings.HasPrefix(l.line, want) {
				return l.line, nil
			}
		case <-timer.C:
			return "", fmt.Errorf("the agent supervisor did not report %q within %s (log: %s)", strings.TrimSpace(want), d, log)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// RunHere runs a prepared agent in the caller's terminal and returns its
// exit code when it ends. Ctrl-C reaches the agent, not stemctl; SIGTERM and
// SIGHUP to stemctl (stemctl agent stop, a closed terminal) are passed on.
func (e *Env) RunHere(p *Prepared, stdin, stdout, stderr *os.File) (int, error) {
	r := p.Record
	defer e.Store.Remove(r.ID)
	cmd := exec.Command(p.Launch.Argv[0], p.Launch.Argv[1:]...)
	cmd.Dir = r.WorkDir
	cmd.Env = mergeEnv(e.Environ, p.Launch.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("start %s: %w", p.Launch.Argv[0], err)
	}
	r.PID = os.Getpid()
	r.PIDStart, _ = procstat.Start(r.PID)
	r.ProviderPID = cmd.Process.Pid
	if err := e.Store.Write(r); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					fmt.Fprintf(stderr, "\r\nstemctl: agent %s (%s) ended by %v\r\n", r.ID, r.Provider, ws.Signal())
					return 128 + int(ws.Signal()), nil // as a shell reports it
				}
				return ee.ExitCode(), nil
			}
			return -1, err
		case s := <-sigs:
			// The terminal's own Ctrl-C / Ctrl-\ already reached the agent
			// (same process group); only stop requests are passed on, once
			// each. ctx is not watched: stemctl cancels it on Ctrl-C too,
			// which is the agent's key, not a request to stop it.
			if s == syscall.SIGTERM || s == syscall.SIGHUP {
				cmd.Process.Signal(s)
			}
		}
	}
}

// StopResult is what stopping one agent found and did.
type StopResult struct {
	// AlreadyEnded: its process was gone before the stop (the window was
	// closed, the container stopped, removed or re-created, or it exited).
	AlreadyEnded bool
	// Reason is why its supervisor was ending it before the stop, if it
	// was (for example its container was removed).
	Reason   string
	Warnings []string
}

// Stop ends an agent: its process (the supervisor or the --here stemctl)
// gets SIGTERM and, after timeout, SIGKILL; its window is closed when it
// is still there and still the agent's; its directory is removed. The
// student's session is otherwise untouched.
func (e *Env) Stop(ctx context.Context, r agentstore.Record, reg *registry.Registry, tmuxDial func(context.Context, registry.Record) (*tmux.Client, error), timeout time.Duration) (res StopResult, err error) {
	// Read before the stop: the supervisor then records the stop itself.
	if st, err := e.Store.ReadState(r.ID); err == nil {
		res.Reason = st.Stopping
	}
	res.AlreadyEnded = !agentstore.Alive(r.PID, r.PIDStart)
	if !res.AlreadyEnded {
		syscall.Kill(r.PID, syscall.SIGTERM)
		deadline := time.Now().Add(timeout)
		for agentstore.Alive(r.PID, r.PIDStart) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		if agentstore.Alive(r.PID, r.PIDStart) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("agent %s did not end within %s: killed", r.ID, timeout))
			if r.ProviderPID > 0 {
				syscall.Kill(-r.ProviderPID, syscall.SIGKILL)
			}
			syscall.Kill(r.PID, syscall.SIGKILL)
			for i := 0; i < 50 && agentstore.Alive(r.PID, r.PIDStart); i++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if !agentstore.Alive(r.PID, r.PIDStart) {
		// A supervisor that was killed (here or before) did not remove
		// its socket, nor its sandbox.
		agentstore.RemoveSocket(r)
		if r.Sandbox != "" && e.RemoveSandbox != nil {
			if err := e.RemoveSandbox(ctx, r.Sandbox); err != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("could not remove the agent's sandbox %s: %v", r.Sandbox, err))
			}
		}
	}
	if r.Mode == agentstore.ModeWindow && r.Pane != "" {
		if w := e.closePane(ctx, r, reg, tmuxDial); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	if err := e.Store.Remove(r.ID); err != nil {
		return res, err
	}
	return res, nil
}

// closePane kills the agent's pane when the instance is the same container
// and the pane still carries the agent's id.
func (e *Env) closePane(ctx context.Context, r agentstore.Record, reg *registry.Registry, tmuxDial func(context.Context, registry.Record) (*tmux.Client, error)) string {
	rec, err := reg.Get(ctx, r.Instance)
	if err != nil || rec.ContainerID != r.ContainerID {
		return "" // the container is gone or new: so is the window
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tc, err := tmuxDial(ctx, rec)
	if err != nil {
		if tmuxGone(rec.Dir().Tmux()) {
			return "" // its container is gone or stopped: so is the window
		}
		return fmt.Sprintf("could not reach %s's tmux to close the agent's window: %v", r.Instance, err)
	}
	defer tc.Close()
	id, err := tc.DisplayFormat(ctx, tmux.PaneID(r.Pane), "@stem_agent")
	if err != nil {
		if errors.Is(err, tmux.ErrNoPane) {
			return ""
		}
		return fmt.Sprintf("could not check the agent's window %s: %v", r.Pane, err)
	}
	if id != r.ID {
		return ""
	}
	if err := tc.KillPane(ctx, tmux.PaneID(r.Pane)); err != nil && !errors.Is(err, tmux.ErrNoPane) {
		return fmt.Sprintf("could not close the agent's window %s: %v", r.Pane, err)
	}
	return ""
}
