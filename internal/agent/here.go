package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/lib/procstat"
)

// RunHere runs a prepared agent in the caller's terminal and returns its
// exit code when it ends. Ctrl-C reaches the agent, not stemctl; SIGTERM and
// SIGHUP to stemctl (stemctl agent stop, a closed terminal) are passed on.
func (e *Env) RunHere(p *Prepared, stdin, stdout, stderr *os.File) (int, error) {
	r := p.Record
	defer e.Store.Remove(r.ID)
	cmd := exec.Command(p.Launch.Argv[0], p.Launch.Argv[1:]...)
	cmd.Dir = r.WorkDir
	cmd.Env = runspec.Environ(e.Environ, p.Launch.Env)
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
