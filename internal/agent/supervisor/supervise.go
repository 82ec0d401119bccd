package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/cliscreen"
	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/sockets"
)

// Supervise runs the agent described by dir/spec.json under a pseudo
// terminal served on runspec.Spec.Socket: it waits for the first relay, starts the
// provider with the relay's terminal type and size, copies bytes both ways,
// and ends the provider when asked (SIGTERM/SIGINT/SIGHUP), when its window
// stays closed, or when the instance's socket directory goes away. ready
// (may be nil) receives the readiness lines.
//
// A spec with a Sandbox runs the agent in its sandbox container (package
// sandbox) through eng; without one, on a pseudo-terminal here (the
// --here-like host mode that only tests of the supervisor use).
func Supervise(ctx context.Context, dir string, ready io.WriteCloser, logw io.Writer, eng EngineFunc) (err error) {
	lg := log.New(logw, "stemctl agent run: ", log.LstdFlags|log.Lmicroseconds)
	say := func(format string, args ...any) {
		if ready != nil {
			fmt.Fprintf(ready, format+"\n", args...)
		}
	}
	defer func() {
		if err != nil {
			lg.Printf("error: %v", err)
			say("%s %s", runspec.ReadyError, strings.ReplaceAll(err.Error(), "\n", " "))
		}
		if ready != nil {
			ready.Close()
		}
	}()
	var spec runspec.Spec
	data, err := os.ReadFile(filepath.Join(dir, runspec.File))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", runspec.File, err)
	}
	if len(spec.Argv) == 0 {
		return errors.New("spec has no command")
	}
	if spec.RelayTimeout == 0 {
		spec.RelayTimeout = 15 * time.Second
	}
	if spec.Grace == 0 {
		spec.Grace = 3 * time.Second
	}

	// The socket directory is the container's too (it can swap it for a
	// symlink to a host directory at any moment): the socket is made,
	// checked and removed through sockets.Dir, which follows nothing.
	sdir, sname := sockets.Dir{Path: filepath.Dir(spec.Socket)}, filepath.Base(spec.Socket)
	sdir.RemoveSocket(sname)
	ul, err := sdir.Listen(sname)
	if err != nil {
		return err
	}
	defer ul.Close()
	sockInfo, err := sdir.Lstat(sname)
	if err != nil {
		return err
	}
	defer func() {
		if fi, err := sdir.Lstat(sname); err == nil && os.SameFile(fi, sockInfo) {
			sdir.Remove(sname)
		}
	}()
	lg.Printf("agent %s (%s) for %s: listening on %s", spec.ID, spec.Provider, spec.Instance, spec.Socket)
	say(runspec.ReadyListening)

	h := &hub{spec: spec, lg: lg, first: make(chan *relayConn, 1), change: make(chan struct{}, 1)}
	go h.accept(ul)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	var box *boxRun
	if spec.Sandbox != nil {
		// The sandbox starts while the student's window opens.
		if box, err = startBox(ctx, spec, eng, logw, lg); err != nil {
			return err
		}
		defer box.remove()
	}

	var first *relayConn
	select {
	case first = <-h.first:
	case <-time.After(spec.RelayTimeout):
		return fmt.Errorf("the agent's tmux window did not connect within %s", spec.RelayTimeout)
	case s := <-sigs:
		return fmt.Errorf("stopped by %v before the window connected", s)
	case <-ctx.Done():
		return ctx.Err()
	}

	rows, cols := first.hello.Rows, first.hello.Cols
	if rows <= 0 || cols <= 0 {
		rows, cols = 24, 80
	}
	var p *agentProc
	if box != nil {
		p, err = box.exec(ctx, spec, first.hello.Term, rows, cols)
	} else {
		p, err = startPTY(spec, first.hello.Term, rows, cols)
	}
	if err != nil {
		return err
	}
	defer p.close()
	h.setTerm(p.term, rows, cols)
	exited := p.exited
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		h.pump(p.out)
	}()
	if p.started != nil {
		select {
		case err := <-p.started:
			if err != nil {
				h.closeAll(ptyproto.ExitMsg{Code: -1, Message: err.Error()})
				return err
			}
		case <-time.After(runspec.StartTimeout):
			return fmt.Errorf("%s showed nothing in its sandbox within %s", spec.Argv[0], runspec.StartTimeout)
		}
	}
	lg.Printf("started %s (pid %d) at %dx%d, TERM=%s", spec.Argv[0], p.pid, cols, rows, p.termName)
	say("%s %d", runspec.ReadyStarted, p.pid)
	if ready != nil {
		ready.Close()
		ready = nil
	}

	stopping, waiting := "", ""
	saveState := func() {
		st := agentstore.State{Windows: h.count(), Since: time.Now().UTC(), Stopping: stopping, Waiting: waiting}
		if err := agentstore.WriteState(dir, st); err != nil {
			lg.Printf("write %s: %v", agentstore.StateFile, err)
		}
	}
	saveState()
	waitingCh := make(chan string, 1)
	if box != nil && cliscreen.Known(spec.Adapter) {
		// Session events reach the model as lines typed at idle moments
		// (a custom CLI's screen is unknown: it gets none).
		dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
		defer dcancel()
		evs := make(chan SessionEvent, 64)
		go feedEvents(dctx, spec.Sandbox.MCP, os.Environ(), evs, logw, lg)
		d := &deliverer{h: h, adapter: spec.Adapter, dir: dir, sock: filepath.Join(filepath.Dir(spec.Socket), sockets.TmuxSocket),
			lg: lg, events: evs, waiting: waitingCh}
		go d.run(dctx)
	}
	var escalate <-chan time.Time
	var escalations int
	stop := func(why string) {
		if stopping != "" {
			return
		}
		stopping = why
		lg.Printf("stopping the agent: %s", why)
		saveState()
		// A closed terminal first: interactive CLIs save their state on
		// SIGHUP; then SIGTERM, then SIGKILL.
		p.kill(syscall.SIGHUP)
		escalate = time.After(2 * time.Second)
	}
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	tmuxSock := filepath.Join(filepath.Dir(spec.Socket), sockets.TmuxSocket)
	var alone, probe <-chan time.Time
	var ex ptyproto.ExitMsg
wait:
	for {
		select {
		case ex = <-exited:
			break wait
		case w := <-waitingCh:
			waiting = w
			lg.Printf("state: waiting %q", w)
			if stopping == "" {
				saveState()
			}
		case s := <-sigs:
			stop(fmt.Sprintf("stemctl agent stop (%v)", s))
		case <-ctx.Done():
			stop("cancelled")
		case <-h.change:
			if h.count() == 0 {
				// A closed window leaves the student's tmux running: the
				// agent gets the grace period. A stopped or removed
				// container takes its tmux server along: no window can
				// come back, so the agent ends at once (probed until
				// then, as the relay may die a moment before the server).
				alone = time.After(spec.Grace)
				probe = time.After(0)
			} else {
				alone, probe = nil, nil
			}
			if stopping == "" {
				saveState()
			}
		case <-probe:
			probe = nil
			if h.count() > 0 {
				break
			}
			if unixpin.Gone(tmuxSock) {
				stop("the instance's tmux server is gone (its container was stopped, removed or re-created)")
			} else {
				probe = time.After(200 * time.Millisecond)
			}
		case <-alone:
			if h.count() == 0 {
				stop("its window was closed")
			}
		case <-watch.C:
			if fi, err := sdir.Lstat(sname); err != nil || !os.SameFile(fi, sockInfo) {
				stop("the instance's socket directory went away (the container was removed or re-created)")
			}
		case <-escalate:
			escalations++
			if escalations == 1 {
				p.kill(syscall.SIGTERM)
				escalate = time.After(2 * time.Second)
			} else {
				p.kill(syscall.SIGKILL)
				escalate = nil
			}
		}
	}
	// Let the last output reach the window before the exit notice.
	select {
	case <-outDone:
	case <-time.After(500 * time.Millisecond):
	}
	if stopping != "" {
		ex.Message = fmt.Sprintf("%s ended: %s", spec.Provider, stopping)
	}
	lg.Printf("the agent ended: code %d signal %q (%s)", ex.Code, ex.Signal, stopping)
	h.closeAll(ex)
	return nil
}

// withoutTerminal drops the variables that describe the terminal stemctl
// was started from (perhaps the host's own tmux): the agent in a window has
// another terminal.
func withoutTerminal(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "TMUX", "TMUX_PANE", "STY", "WINDOW", "COLUMNS", "LINES", "TERM_PROGRAM", "TERM_PROGRAM_VERSION",
			"TERM_SESSION_ID", "COLORTERM", "VTE_VERSION", "WINDOWID":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// hostTerm is the relay's TERM when the host knows it, else xterm-256color
// (the agent runs on the host and looks its terminal up there).
func hostTerm(t string) string {
	if t == "" || strings.ContainsAny(t, "/\\") || strings.HasPrefix(t, ".") {
		return "xterm-256color"
	}
	dirs := []string{os.Getenv("TERMINFO")}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".terminfo"))
	}
	dirs = append(dirs, "/etc/terminfo", "/lib/terminfo", "/usr/share/terminfo", "/usr/lib/terminfo")
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for _, sub := range []string{t[:1], fmt.Sprintf("%x", t[0])} {
			if _, err := os.Stat(filepath.Join(d, sub, t)); err == nil {
				return t
			}
		}
	}
	return "xterm-256color"
}
