package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/lib/procstat"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/tmux"
)

// StartWindow starts the supervisor for a prepared agent, opens its window
// in the student's tmux and waits until the provider runs.
func (e *Env) StartWindow(ctx context.Context, p *Prepared, background bool, tmuxDial func(context.Context, registry.Record) (*tmux.Client, error), rec registry.Record) (_ agentstore.Record, err error) {
	r := p.Record
	spec := runspec.Spec{ID: r.ID, Provider: r.Provider, Adapter: r.Adapter, Instance: r.Instance, Argv: p.Launch.Argv, Env: p.Launch.Env,
		WorkDir: r.WorkDir, Socket: r.Socket, RelayTimeout: 15 * time.Second, Sandbox: p.Box}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(r.Dir, runspec.File), data, 0o600); err != nil {
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
				grace = runspec.StartTimeout
			}
			if !exitsWithin(waited, r.PID, grace) {
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
	lines := runspec.ReadLines(pr)
	if _, err := runspec.Expect(ctx, lines, runspec.ReadyListening, 10*time.Second, r.Log); err != nil {
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
		wait += runspec.StartTimeout
	}
	line, err := runspec.Expect(ctx, lines, runspec.ReadyStarted+" ", wait, r.Log)
	if err != nil {
		if text, cerr := tc.Capture(ctx, np.Pane, tmux.CaptureOptions{}); cerr == nil && strings.TrimSpace(text.Text) != "" {
			err = fmt.Errorf("%w\nthe agent's window shows:\n%s", err, strings.TrimSpace(text.Text))
		}
		return r, err
	}
	r.ProviderPID, _ = strconv.Atoi(strings.TrimPrefix(line, runspec.ReadyStarted+" "))
	if err := e.Store.Write(r); err != nil {
		return r, err
	}
	return r, nil
}

// exitsWithin waits up to grace for the supervisor to exit (waited closed).
// It gives up at once on a stopped supervisor (SIGSTOP, a debugger): one
// cannot finish anything, and Ctrl-C should not wait the whole grace.
func exitsWithin(waited <-chan struct{}, pid int, grace time.Duration) bool {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	look := time.NewTicker(50 * time.Millisecond)
	defer look.Stop()
	for {
		select {
		case <-waited:
			return true
		case <-deadline.C:
			return false
		case <-look.C:
			if procstat.Stopped(pid) {
				return false
			}
		}
	}
}
