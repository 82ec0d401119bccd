package mcptest

import (
	"context"
	"strings"
	"sync"

	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/mcpserver"
)

// GDB is a fake of the student's debugger behind its bridge: a status, a
// record of the MI commands sent, and run control that stops the program
// again at once (an event every client sees). Until Start, dialing it
// fails with gdbmi.ErrNotRunning, as a missing bridge does.
type GDB struct {
	mu      sync.Mutex
	running bool
	conns   []*gdbConn
	sent    []string
	status  gdbmi.Status
	// ExecFunc, when set, answers every command (the result, or an error
	// such as a *gdbmi.CommandError); nil answers ^done, and run control
	// ^running followed by a stop at the status's frame.
	ExecFunc func(cmd gdbmi.Command) (gdbmi.Result, error)
}

// NewGDB returns a debugger that is not running, its program stopped at
// main once it is.
func NewGDB() *GDB {
	return &GDB{status: gdbmi.Status{State: "stopped", Reason: "breakpoint-hit",
		Frame: &gdbmi.Frame{Func: "main", File: "hello.c", Line: 3}}}
}

// Start makes the bridge answer.
func (g *GDB) Start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running = true
}

// Stop ends the debugger: live connections end, and dialing fails again.
func (g *GDB) Stop() {
	g.mu.Lock()
	conns := g.conns
	g.conns, g.running = nil, false
	g.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// SetStatus replaces what Status answers.
func (g *GDB) SetStatus(st gdbmi.Status) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status = st
}

// Sent returns the MI commands sent, as gdbmi.Command.String renders them.
func (g *GDB) Sent() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

// Dial is the Parts.GDB of the fake.
func (g *GDB) Dial(context.Context) (mcpserver.GDBClient, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.running {
		return nil, &gdbmi.NotRunningError{Path: "g.sock", Reason: "the fake debugger is not started"}
	}
	c := &gdbConn{g: g, events: make(chan gdbmi.Event, 64), done: make(chan struct{})}
	g.conns = append(g.conns, c)
	return c, nil
}

// broadcast sends ev to every connection, as gdb's async records go to
// every client of the bridge.
func (g *GDB) broadcast(ev gdbmi.Event) {
	g.mu.Lock()
	conns := append([]*gdbConn(nil), g.conns...)
	g.mu.Unlock()
	for _, c := range conns {
		c.emit(ev)
	}
}

type gdbConn struct {
	g      *GDB
	mu     sync.Mutex
	events chan gdbmi.Event
	done   chan struct{}
	closed bool
}

func (c *gdbConn) emit(ev gdbmi.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.events <- ev:
	default: // a reader that fell behind loses old events, as gdbmi's do
	}
}

func (c *gdbConn) Exec(ctx context.Context, cmd gdbmi.Command) (gdbmi.Result, error) {
	select {
	case <-c.done:
		return gdbmi.Result{}, gdbmi.ErrNotRunning
	default:
	}
	if err := ctx.Err(); err != nil {
		return gdbmi.Result{}, err
	}
	line := cmd.String()
	c.g.mu.Lock()
	c.g.sent = append(c.g.sent, line)
	fn, frame := c.g.ExecFunc, c.g.status.Frame
	c.g.mu.Unlock()
	if fn != nil {
		return fn(cmd)
	}
	if strings.HasPrefix(line, "-exec-") {
		c.g.broadcast(gdbmi.Event{Kind: gdbmi.EventRunning, Class: "running"})
		c.g.broadcast(gdbmi.Event{Kind: gdbmi.EventStopped, Class: "stopped", Reason: "end-stepping-range", ThreadID: "1", Frame: frame})
		return gdbmi.Result{Class: "running"}, nil
	}
	return gdbmi.Result{Class: "done"}, nil
}

func (c *gdbConn) Status(ctx context.Context, _ bool) (gdbmi.Status, error) {
	select {
	case <-c.done:
		return gdbmi.Status{}, gdbmi.ErrNotRunning
	default:
	}
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.status, ctx.Err()
}

func (c *gdbConn) Events() <-chan gdbmi.Event { return c.events }

func (c *gdbConn) Done() <-chan struct{} { return c.done }

func (c *gdbConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
		close(c.events)
	}
	return nil
}
