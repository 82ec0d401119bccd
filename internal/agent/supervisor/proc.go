package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/engine"
)

// EngineFunc opens the container engine (the supervisor needs it for
// sandboxed agents only).
type EngineFunc func(context.Context) (engine.Engine, error)

// terminal is the agent's terminal as the hub drives it: the student's
// keys go in, the window's size is set.
type terminal interface {
	Write(p []byte) (int, error)
	setSize(rows, cols int)
}

// agentProc is a started agent.
type agentProc struct {
	// pid is the CLI's process on the host (0 in a sandbox: it is a
	// process of the container).
	pid      int
	termName string
	term     terminal
	out      io.Reader
	exited   <-chan ptyproto.ExitMsg
	// kill asks the agent to end (SIGHUP, then SIGTERM, then SIGKILL).
	kill  func(syscall.Signal)
	close func()
	// started (may be nil: started at once) reports whether the program
	// really runs: nil at its first output, an error if it ended first.
	started <-chan error
}

type ptyTerm struct{ f *os.File }

func (t ptyTerm) Write(p []byte) (int, error) { return t.f.Write(p) }
func (t ptyTerm) setSize(rows, cols int) {
	pty.Setsize(t.f, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
}

// startPTY runs the spec's command here on a pseudo-terminal.
func startPTY(spec runspec.Spec, term string, rows, cols int) (*agentProc, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.WorkDir
	name := hostTerm(term)
	cmd.Env = runspec.Environ(withoutTerminal(os.Environ()), spec.Env, map[string]string{"TERM": name})
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	exited := make(chan ptyproto.ExitMsg, 1)
	go func() { exited <- exitMsg(cmd.Wait()) }()
	pid := cmd.Process.Pid
	return &agentProc{
		pid: pid, termName: name, term: ptyTerm{ptmx}, out: ptmx, exited: exited,
		kill:  func(s syscall.Signal) { syscall.Kill(-pid, s) },
		close: func() { ptmx.Close() },
	}, nil
}

// exitMsg is how a process's end is told to the window.
func exitMsg(waitErr error) ptyproto.ExitMsg {
	ex := ptyproto.ExitMsg{Code: -1}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		ex.Code = 0
	case errors.As(waitErr, &ee):
		ex.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Signal = unix.SignalName(ws.Signal())
		}
	}
	return ex
}
