package mcpserver

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/lib/evring"
	"github.com/stem-edu/stem/internal/sessionevent"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/workspace"
)

// Event kinds sent to agents (package sessionevent).
const (
	EvGDBStopped     = sessionevent.GDBStopped
	EvGDBExited      = sessionevent.GDBExited
	EvProgramExited  = sessionevent.ProgramExited
	EvProgramCrashed = sessionevent.ProgramCrashed
	EvBuildFailed    = sessionevent.BuildFailed
	EvTestFailed     = sessionevent.TestFailed
)

// Event is one session event, as sent in notifications and returned by
// session_events.
type Event = sessionevent.Event

const ringSize = 256

// eventHub turns what happens in the session into events: gdb stops from
// the bridge, and commands finishing in panes (from the shell integration's
// marks). Events go out as MCP logging notifications (logger "stem.events")
// and are kept in a ring for session_events.
type eventHub struct {
	s *Server

	mu      sync.Mutex
	ring    evring.Ring[Event]
	seq     int64
	changed evring.Signal // after every event
	expects map[tmux.PaneID]string
	ready   chan struct{} // closed once the MCP session can take notifications
	once    sync.Once
}

func newEventHub(s *Server) *eventHub {
	return &eventHub{s: s, expects: map[tmux.PaneID]string{}, ready: make(chan struct{})}
}

// run marks the hub ready to send once the transport is serving.
func (h *eventHub) run(ctx context.Context) {
	h.once.Do(func() { close(h.ready) })
}

func (h *eventHub) publish(ev Event) {
	// Role is a pane option anything in the container can set; the gdb
	// part is cleaned where it is built (eventJSON).
	ev.Role, ev.Pane, ev.Signal = termtext.String(ev.Role), termtext.String(ev.Pane), termtext.String(ev.Signal)
	h.mu.Lock()
	h.seq++
	ev.Seq = h.seq
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	h.ring.Add(ev.Seq, ev, ringSize)
	h.mu.Unlock()
	h.changed.Broadcast()
	if c := h.s.current(); c != nil && h.s.policyFor(c).Refusal("session_events", h.s.opt.Level) != "" {
		return // the task's agent policy leaves agents no view of the session
	}
	select {
	case <-h.ready:
		h.s.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationMessage), map[string]any{
			"level": "notice", "logger": "stem.events", "data": ev,
		})
	default:
	}
}

// since returns events after seq, waiting up to wait for the first one.
func (h *eventHub) since(ctx context.Context, seq int64, wait time.Duration) []Event {
	return evring.Wait(ctx, &h.changed, wait, func() ([]Event, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		out := h.ring.After(seq)
		return out, len(out) > 0
	})
}

func (h *eventHub) expect(p tmux.PaneID, action string) {
	h.mu.Lock()
	h.expects[p] = action
	h.mu.Unlock()
}

func (h *eventHub) unexpect(p tmux.PaneID) {
	h.mu.Lock()
	delete(h.expects, p)
	h.mu.Unlock()
}

// attach starts watching a newly verified connection; the watchers end
// when the connection closes.
func (h *eventHub) attach(c *conn) {
	instance := c.target().Record.Instance
	c.gdbl.mu.Lock()
	c.gdbl.publish = func(ev gdbmi.Event) {
		switch ev.Kind {
		case gdbmi.EventStopped:
			h.publish(Event{Type: EvGDBStopped, Instance: instance, Signal: ev.Signal, GDB: eventJSON(ev)})
		case gdbmi.EventExited:
			// exited-signalled names the signal that killed the program.
			h.publish(Event{Type: EvGDBExited, Instance: instance, ExitCode: ev.ExitCode, Signal: ev.Signal, GDB: eventJSON(ev)})
		}
	}
	c.gdbl.mu.Unlock()
	sub, err := c.tmux.Subscribe("", 4096)
	if err == nil {
		go h.watchPanes(c, sub, instance)
	}
	go h.watchGDB(c)
}

// watchPanes follows every pane's output for commands finishing.
func (h *eventHub) watchPanes(c *conn, sub *tmux.Subscription, instance string) {
	defer sub.Close()
	panes := map[tmux.PaneID]*tmux.Marks{}
	for n := range sub.C() {
		if n.Kind != "output" || n.Pane == "" {
			continue
		}
		m := panes[n.Pane]
		if m == nil {
			m = c.tmux.NewMarks(n.Pane)
			panes[n.Pane] = m
		}
		for _, cmd := range m.FeedCommands(n.Data) {
			h.finished(c, n.Pane, instance, cmd)
		}
	}
}

// finished publishes the event of a command that finished in pane p.
//
// Without a real wait status (cmd.Waited) the signal is inferred from the shell's status: 128+n is taken
// for signal n, so in a shell pane a program calling exit(139) is reported
// as killed by SIGSEGV. The debug layout's program pane reports the real
// wait status: there only a program killed by a signal has one.
func (h *eventHub) finished(c *conn, p tmux.PaneID, instance string, cmd tmux.Command) {
	code := cmd.Status
	h.mu.Lock()
	action := h.expects[p]
	delete(h.expects, p)
	h.mu.Unlock()
	if action == "" && cmd.Line != "" {
		// The student's own `make` in any pane: the command line equals
		// the task's build, test or run command.
		action = h.s.manifestAction(c, cmd.Line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	info, _ := c.tmux.PaneInfo(ctx, p)
	cancel()
	ev := Event{Instance: instance, Pane: string(p), Role: info.Role, Action: action, ExitCode: &code}
	var sig syscall.Signal
	switch {
	case cmd.Waited:
		sig = syscall.Signal(cmd.Signal)
	case code > 128 && code < 160:
		sig = syscall.Signal(code - 128)
	}
	switch {
	case sig != 0 && crashSignals[sig]:
		ev.Type, ev.Signal = EvProgramCrashed, signalName(sig)
	case action == "build" && code != 0:
		ev.Type = EvBuildFailed
	case action == "test" && code != 0:
		ev.Type = EvTestFailed
	default:
		ev.Type = EvProgramExited
		if sig != 0 {
			ev.Signal = signalName(sig)
		}
	}
	h.publish(ev)
}

// manifestAction names the manifest command (build, test or run) that line
// is, after trimming, or returns "".
func (s *Server) manifestAction(c *conn, line string) string {
	tc, err := s.taskContext(c)
	if err != nil {
		return ""
	}
	cmds, _ := tc["commands"].(workspace.Commands)
	for _, a := range []struct{ action, cmd string }{{"build", cmds.Build}, {"test", cmds.Test}, {"run", cmds.Run}} {
		if a.cmd != "" && strings.TrimSpace(a.cmd) == strings.TrimSpace(line) {
			return a.action
		}
	}
	return ""
}

var crashSignals = map[syscall.Signal]bool{
	syscall.SIGSEGV: true, syscall.SIGABRT: true, syscall.SIGBUS: true, syscall.SIGFPE: true, syscall.SIGILL: true, syscall.SIGTRAP: true,
}

// signalName is SIGSEGV for 11; a number beyond the system's signals is
// named as such.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(sig))
}

// watchGDB keeps a gdb connection while the student's debugger runs, so
// stops are reported even when no tool call dials it. g.sock appears when
// the debug layout starts; checking for it is a stat every 200 ms.
func (h *eventHub) watchGDB(c *conn) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if !c.alive() {
			return
		}
		c.gdbl.mu.Lock()
		connected := c.gdbl.client != nil
		if connected {
			select {
			case <-c.gdbl.client.Done():
				connected = false
			default:
			}
		}
		c.gdbl.mu.Unlock()
		if connected {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.gdb(ctx) // ErrNotRunning until the bridge starts
		cancel()
	}
}

func eventTools() []toolDef {
	return []toolDef{{
		clean: true, timeout: 65 * time.Second,
		tool: mcp.NewTool("session_events",
			mcp.WithDescription("Events in the session since a sequence number: gdb stops, programs exiting or crashing in a pane, failed builds and tests. exit_code is the shell's status (128+n for signal n); signal names the signal that killed the program: in a shell pane it is inferred from a status over 128, so a program calling exit(139) reads as SIGSEGV; the debug layout's program pane (role program) reports the real wait status. Waits up to wait_ms for the next one when there is none yet. The same events are sent as MCP logging notifications (logger stem.events) as they happen."),
			mcp.WithInteger("since", mcp.Description("return events with a larger seq (default 0: everything kept)"), mcp.Min(0)),
			mcp.WithInteger("wait_ms", mcp.Description("wait this long for a new event (default 0, at most 60000)"), mcp.Min(0), mcp.Max(60000)),
			readOnly()),
		run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
			since, err := optInt(req, "since", 0, 0, 1<<62)
			if err != nil {
				return nil, err
			}
			wait, err := optInt(req, "wait_ms", 0, 0, 60000)
			if err != nil {
				return nil, err
			}
			if _, err := s.target(ctx); err != nil {
				return nil, err
			}
			evs := s.events.since(ctx, int64(since), time.Duration(wait)*time.Millisecond)
			if evs == nil {
				evs = []Event{}
			}
			return map[string]any{"events": evs}, nil
		},
	}}
}
