package agent

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/tmux"
)

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
		if unixpin.Gone(rec.Dir().Tmux()) {
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
