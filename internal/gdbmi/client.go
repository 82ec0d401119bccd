package gdbmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/lib/unixpin"
)

// ErrNotRunning means there is no debugger bridge to talk to: the student
// has not started the debugger, or it has exited.
var ErrNotRunning = errors.New("the student's debugger is not running")

// NotRunningError says why Dial found no debugger. It matches ErrNotRunning
// with errors.Is.
type NotRunningError struct {
	Path   string
	Reason string
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("%v (%s: %s); start it with the task's debug command", ErrNotRunning, e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrNotRunning) true.
func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }

// CommandError is gdb's ^error answer to a command.
type CommandError struct {
	Command string
	Msg     string
	Code    string // gdb's error code, e.g. "undefined-command", often ""
}

func (e *CommandError) Error() string { return fmt.Sprintf("gdb: %s: %s", e.Command, e.Msg) }

// DefaultTimeout applies to Dial and Exec when ctx has no deadline.
const DefaultTimeout = 15 * time.Second

// Bounds on what the bridge (in the container) can make the host hold:
// one line; the console and log text gathered for one command; and an
// event, which may wait in Events with up to eventQueue others, so a
// record over maxEventLine keeps only its class (stream text is cut).
const (
	maxResultLine = 8 << 20
	maxCallOutput = 1 << 20
	maxEventLine  = 16 << 10
	eventQueue    = 256
)

// outputCut ends console or log text cut at maxCallOutput.
const outputCut = "\n[stem: more output than this was dropped]\n"

// Result is gdb's answer to one command.
type Result struct {
	Class   string  // "done", "running", "connected" or "exit"
	Values  []Field // the result record's fields
	Console string  // console stream output the command produced
	Log     string  // log stream output (gdb's warnings and error text)
}

// Get returns the first result field called name.
func (r Result) Get(name string) (Value, bool) { return getField(r.Values, name) }

// EventKind classifies an Event.
type EventKind string

// Event kinds.
const (
	EventStopped EventKind = "stopped" // the program stopped (breakpoint, step, signal...)
	EventRunning EventKind = "running" // the program was resumed, by anyone
	EventExited  EventKind = "exited"  // the program exited
	EventConsole EventKind = "console" // console text not produced by one of this client's commands
	EventTarget  EventKind = "target"  // the program's output relayed by gdb
	EventLog     EventKind = "log"     // gdb's log text
	EventNotify  EventKind = "notify"  // other notifications: breakpoint-created, thread-selected, ...
)

// Event is an asynchronous record from gdb, seen by every client.
type Event struct {
	Kind       EventKind
	Class      string // the record's class, e.g. "stopped", "breakpoint-modified"
	Reason     string // why the program stopped or exited
	Signal     string // signal-name, e.g. "SIGINT"
	ExitCode   *int
	Breakpoint int    // bkptno of a breakpoint stop
	ThreadID   string // thread-id of a stop, or id of thread-selected
	Frame      *Frame // where the program stopped, or the newly selected frame
	Text       string // stream text
	Record     Record // the record as parsed
	Received   time.Time
}

type callResult struct {
	res Result
	err error
}

type call struct {
	cmd       Command
	console   strings.Builder
	log       strings.Builder
	done      chan callResult
	abandoned bool
}

// Client is a connection to the student's gdb through the bridge's g.sock.
// It is safe for concurrent use.
type Client struct {
	path string
	conn net.Conn

	wmu sync.Mutex // serializes token registration and writes

	mu      sync.Mutex
	next    uint64
	calls   map[string]*call
	readErr error
	// lastExec is the latest *running or *stopped record seen on this
	// connection; it is fresher than gdb-sync.json, which is written
	// after clients are told.
	lastExec *Record

	events chan Event
	done   chan struct{}
}

// Dial connects to the bridge at sockPath (the container's g.sock). If no
// bridge is there it returns a *NotRunningError.
func Dial(ctx context.Context, sockPath string) (*Client, error) {
	fi, err := os.Lstat(sockPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &NotRunningError{Path: sockPath, Reason: "no debugger socket"}
	}
	if err != nil {
		return nil, fmt.Errorf("gdb socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("gdb socket %s is a %s, not a socket", sockPath, fileKind(fi))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	// Pinned (see package unixpin): the Lstat above cannot stop a symlink
	// renamed over g.sock just after it.
	conn, err := unixpin.Dial(ctx, sockPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &NotRunningError{Path: sockPath, Reason: "no debugger socket"}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, &NotRunningError{Path: sockPath, Reason: "stale socket, nobody is listening"}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to gdb bridge: %w", err)
	}
	c := &Client{
		path:   sockPath,
		conn:   conn,
		calls:  map[string]*call{},
		events: make(chan Event, eventQueue),
		done:   make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// Close ends the connection. Commands in flight fail; gdb still finishes
// them and the bridge discards their answers.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Events delivers asynchronous events. It is closed when the connection
// ends. A consumer that falls more than 256 events behind loses events
// rather than stalling command results.
func (c *Client) Events() <-chan Event { return c.events }

// Exec sends one command and waits for its result. A ^error answer is
// returned as a *CommandError together with the Result. If ctx ends first,
// Exec returns; the command may still run in gdb.
func (c *Client) Exec(ctx context.Context, cmd Command) (Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	cl := &call{cmd: cmd, done: make(chan callResult, 1)}
	tok, err := c.send(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	select {
	case r := <-cl.done:
		return r.res, r.err
	case <-ctx.Done():
		c.mu.Lock()
		cl.abandoned = true
		c.mu.Unlock()
		return Result{}, fmt.Errorf("gdb %s: no answer: %w", cmd.op, ctx.Err())
	case <-c.done:
		// The reader may have delivered the result just before ending.
		select {
		case r := <-cl.done:
			return r.res, r.err
		default:
		}
		c.mu.Lock()
		delete(c.calls, tok)
		err := c.readErr
		c.mu.Unlock()
		return Result{}, fmt.Errorf("gdb %s: connection to the debugger closed: %w", cmd.op, err)
	}
}

func (c *Client) send(ctx context.Context, cl *call) (string, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.next++
	tok := strconv.FormatUint(c.next, 10)
	line, err := cl.cmd.line(tok)
	if err != nil {
		c.mu.Unlock()
		return "", err
	}
	select {
	case <-c.done:
		err := c.readErr
		c.mu.Unlock()
		return "", fmt.Errorf("gdb %s: connection to the debugger closed: %w", cl.cmd.op, err)
	default:
	}
	c.calls[tok] = cl
	c.mu.Unlock()
	dl, _ := ctx.Deadline()
	_ = c.conn.SetWriteDeadline(dl)
	if _, err := io.WriteString(c.conn, line); err != nil {
		c.mu.Lock()
		delete(c.calls, tok)
		c.mu.Unlock()
		return "", fmt.Errorf("gdb %s: send: %w", cl.cmd.op, err)
	}
	return tok, nil
}

func (c *Client) readLoop() {
	defer func() {
		c.mu.Lock()
		for tok, cl := range c.calls {
			if !cl.abandoned {
				cl.done <- callResult{err: fmt.Errorf("gdb %s: connection to the debugger closed: %w", cl.cmd.op, c.readErr)}
			}
			delete(c.calls, tok)
		}
		c.mu.Unlock()
		close(c.events)
		close(c.done)
	}()
	br := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		line, err := readLine(br, maxResultLine)
		if errors.Is(err, errLineTooLong) {
			continue
		}
		if err != nil {
			c.mu.Lock()
			if errors.Is(err, io.EOF) {
				err = errors.New("the debugger bridge closed the connection (gdb exited?)")
			}
			c.readErr = err
			c.mu.Unlock()
			return
		}
		rec, err := Parse(line)
		if err != nil {
			continue
		}
		c.dispatch(rec, len(line))
	}
}

func (c *Client) dispatch(rec Record, size int) {
	now := time.Now()
	if rec.Kind == KindExec {
		c.mu.Lock()
		c.lastExec = &rec
		c.mu.Unlock()
	}
	switch rec.Kind {
	case KindPrompt:
		return
	case KindResult:
		if rec.Token == "" {
			// Results of the student's console commands carry no token;
			// the matching *running / *stopped events follow.
			return
		}
		c.mu.Lock()
		cl, ok := c.calls[rec.Token]
		delete(c.calls, rec.Token)
		c.mu.Unlock()
		if !ok || cl.abandoned {
			return
		}
		res := Result{Class: rec.Class, Values: rec.Results, Console: cl.console.String(), Log: cl.log.String()}
		var err error
		if rec.Class == "error" {
			err = &CommandError{Command: cl.cmd.op, Msg: rec.Str("msg"), Code: rec.Str("code")}
		}
		cl.done <- callResult{res: res, err: err}
		return
	case KindNotify, KindConsole, KindLog:
		// The bridge marks the output of our own commands with their
		// token; anything else is news for Events.
		if rec.Token == "" {
			break
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := c.calls[rec.Token]
		switch {
		case cl == nil || cl.abandoned:
		case rec.Kind == KindConsole:
			appendCapped(&cl.console, rec.Text)
		case rec.Kind == KindLog:
			appendCapped(&cl.log, rec.Text)
		}
		// Notifications of our own commands (setting changes) are dropped:
		// DataEvaluate's temporary `with` settings are not news, and a
		// Console "set ..." caller knows what it did.
		return
	}
	if size > maxEventLine {
		rec = trimEvent(rec)
	}
	c.emit(eventFrom(rec, now))
}

// appendCapped adds text to b up to maxCallOutput, then marks the cut once.
func appendCapped(b *strings.Builder, text string) {
	room := maxCallOutput - b.Len()
	switch {
	case room < 0 || text == "":
		return
	case len(text) <= room:
		b.WriteString(text)
	default:
		b.WriteString(text[:room])
		b.WriteString(outputCut)
	}
}

// trimEvent keeps what an event over maxEventLine may keep while it waits
// in Events: the kind, class and token, and at most maxEventLine bytes of
// stream text.
func trimEvent(rec Record) Record {
	out := Record{Kind: rec.Kind, Token: rec.Token, Class: rec.Class, Text: rec.Text}
	if len(out.Text) > maxEventLine {
		out.Text = strings.ToValidUTF8(out.Text[:maxEventLine], "") + outputCut
	}
	return out
}

func eventFrom(rec Record, now time.Time) Event {
	ev := Event{Class: rec.Class, Record: rec, Received: now}
	switch rec.Kind {
	case KindConsole:
		ev.Kind, ev.Text = EventConsole, rec.Text
	case KindTarget:
		ev.Kind, ev.Text = EventTarget, rec.Text
	case KindLog:
		ev.Kind, ev.Text = EventLog, rec.Text
	case KindExec:
		switch rec.Class {
		case "running":
			ev.Kind, ev.ThreadID = EventRunning, rec.Str("thread-id")
		case "stopped":
			si := parseStopped(rec)
			ev.Kind = EventStopped
			if si.exited {
				ev.Kind = EventExited
			}
			ev.Reason, ev.Signal, ev.ExitCode, ev.Frame = si.reason, si.signal, si.exitCode, si.frame
			ev.ThreadID, ev.Breakpoint = si.threadID, si.breakpoint
		default:
			ev.Kind = EventNotify
		}
	default:
		ev.Kind = EventNotify
		if f, ok := rec.Get("frame"); ok {
			ev.Frame = frameFrom(f)
		}
		ev.ThreadID = rec.Str("id")
	}
	return ev
}

func (c *Client) emit(ev Event) {
	select {
	case c.events <- ev:
	default: // the consumer is too far behind: the event is lost
	}
}

// Register is one register's value as gdb shows it.
type Register struct {
	Name    string `json:"name"`
	Hex     string `json:"hex"`
	Natural string `json:"natural,omitempty"`
}

// Status is a one-call snapshot of the debugger.
type Status struct {
	State     string     `json:"state"` // StateNotStarted, StateRunning, StateStopped, StateExited
	Reason    string     `json:"reason,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	ThreadID  string     `json:"thread_id,omitempty"`
	Frame     *Frame     `json:"frame,omitempty"` // the selected frame
	Backtrace []Frame    `json:"backtrace,omitempty"`
	Registers []Register `json:"registers,omitempty"` // the architecture's general registers
	Sync      *SyncState `json:"sync,omitempty"`      // gdb-sync.json as the bridge last wrote it
}

// statusFrames bounds the backtrace in Status.
const statusFrames = 64

// Status reports the program state, selected frame and backtrace, and with
// withRegisters the general registers by name. It uses read-only commands
// only, so the observe level may call it.
func (c *Client) Status(ctx context.Context, withRegisters bool) (Status, error) {
	var st Status
	if s, err := ReadSync(filepath.Dir(c.path)); err == nil {
		st.Sync = &s
	}
	ti, err := c.Exec(ctx, ThreadInfo())
	if err != nil {
		return st, err
	}
	threads, _ := ti.Get("threads")
	cur, _ := ti.Get("current-thread-id")
	var thread *Value
	for _, t := range threads.Elems() {
		if t.Str("id") == cur.Const {
			t := t
			thread = &t
			break
		}
	}
	c.mu.Lock()
	last := c.lastExec
	c.mu.Unlock()
	if thread == nil {
		st.State = StateNotStarted
		if last != nil && last.Class == "stopped" {
			if si := parseStopped(*last); si.exited {
				st.State, st.Reason, st.Signal, st.ExitCode = StateExited, si.reason, si.signal, si.exitCode
				return st, nil
			}
		}
		if st.Sync != nil && st.Sync.State == StateExited {
			st.State, st.Reason, st.Signal, st.ExitCode = StateExited, st.Sync.Reason, st.Sync.Signal, st.Sync.ExitCode
		}
		return st, nil
	}
	st.ThreadID = cur.Const
	if thread.Str("state") == "running" {
		st.State = StateRunning
		return st, nil
	}
	st.State = StateStopped
	switch {
	case last != nil && last.Class == "stopped":
		si := parseStopped(*last)
		st.Reason, st.Signal = si.reason, si.signal
	case last == nil && st.Sync != nil && st.Sync.State == StateStopped:
		st.Reason, st.Signal = st.Sync.Reason, st.Sync.Signal
	}
	if f, ok := thread.Get("frame"); ok {
		st.Frame = frameFrom(f)
	}
	bt, err := c.Exec(ctx, StackListFrames(statusFrames))
	if err != nil {
		return st, err
	}
	stack, _ := bt.Get("stack")
	for _, f := range stack.Elems() {
		if fr := frameFrom(f); fr != nil {
			st.Backtrace = append(st.Backtrace, *fr)
		}
	}
	if withRegisters {
		r, err := c.Exec(ctx, statusRegisters())
		if err != nil {
			return st, err
		}
		st.Registers = parseInfoRegisters(r.Console)
	}
	return st, nil
}

// parseInfoRegisters reads `info registers` text: name, raw hex value, and
// gdb's natural rendering.
func parseInfoRegisters(text string) []Register {
	var regs []Register
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		r := Register{Name: f[0], Hex: f[1]}
		if len(f) > 2 {
			r.Natural = strings.Join(f[2:], " ")
		}
		regs = append(regs, r)
	}
	return regs
}
