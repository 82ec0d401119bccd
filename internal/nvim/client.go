// Package nvim talks to the student's Neovim over its RPC socket (n.sock).
//
// The socket is created by `nvim --listen` inside the task container, in a
// directory bind-mounted at the same absolute path on the host. Everything
// here targets the Neovim 0.7 API (Debian 12), so there is no nvim_cmd and
// no vim.fs.
//
// Three rules shape the code:
//   - No call can hang the caller. go-client calls block until Neovim
//     answers, so every call runs under a deadline; when it passes, the
//     connection is closed (which unblocks the call) and the next call
//     redials. A request Neovim had already received may still run after
//     the caller gave up: a timed-out write is "unknown", not "not done".
//   - Neovim answers nothing while it waits for a key at a prompt (Press
//     ENTER, -- More --, confirm(), a pending `"`/<C-w>/<C-v> ...). Before
//     any ordinary API call we ask nvim_get_mode, which Neovim serves even
//     then, and return a *BlockedError (errors.Is(err, ErrBlocked)) instead
//     of queueing a request that would wait for the student.
//   - Buffer text, buffer names and diagnostic messages are untrusted data:
//     they are passed to Neovim only as RPC values (never spliced into Ex or
//     Lua source) and returned as sanitised strings (see Text).
//   - The server is untrusted too: whatever runs in the container can
//     answer on n.sock. Every byte it sends passes package rpcguard before
//     go-client decodes it (bounded sizes and nesting; its requests and
//     notifications are never answered), its error texts come back as
//     *ServerError (one sanitized, bounded line), and go-client's log
//     lines go through termtext. A refused message marks the session
//     broken (errors.Is(err, ErrRefused)); other instances and the rest of
//     the process go on.
package nvim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/neovim/go-client/msgpack/rpc"
	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/nvim/rpcguard"
	"github.com/stem-edu/stem/internal/termtext"
)

// Defaults for Options.
const (
	DefaultCallTimeout = 5 * time.Second
	DefaultDialTimeout = 2 * time.Second
)

// minAPILevel is Neovim 0.7's API level; older servers lack nvim_exec_lua
// features and vim.diagnostic that we rely on.
const minAPILevel = 9

var (
	// ErrBlocked: Neovim is waiting for the student's input; nothing was done.
	// The concrete error is a *BlockedError carrying the mode.
	ErrBlocked = errors.New("neovim is waiting for input")
	// ErrNotLoaded: the file is not loaded in any buffer (or the buffer is
	// unloaded); the caller should read the file from disk itself.
	ErrNotLoaded = errors.New("not loaded in a Neovim buffer")
	// ErrNoBuffer: there is no buffer with that number.
	ErrNoBuffer = errors.New("no such buffer")
	// ErrBufType: the buffer is not a normal file buffer (terminal, prompt,
	// nofile, help, ...), so it may not be edited.
	ErrBufType = errors.New("not a normal file buffer")
	// ErrUnavailable: Neovim cannot be reached (not running, restarting, or
	// the connection dropped mid-call).
	ErrUnavailable = errors.New("neovim is not reachable")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("nvim client closed")
	// ErrRefused: the server sent a message over stem's limits or outside
	// msgpack-RPC (see package rpcguard); the error says what it claimed.
	ErrRefused = rpcguard.ErrRefused
)

// maxServerError bounds the text of an error Neovim answered with.
const maxServerError = 1000

// ServerError is an error Neovim answered a request with. Its text is the
// server's, as one sanitized line of at most maxServerError bytes; Unwrap
// gives go-client's error for errors.Is/As.
type ServerError struct {
	Msg string
	err error
}

func (e *ServerError) Error() string { return e.Msg }
func (e *ServerError) Unwrap() error { return e.err }

// BlockedError reports that Neovim is waiting for the student's input.
type BlockedError struct {
	Mode     string // nvim_get_mode().mode, e.g. "c", "r", "rm", "r?"
	Blocking bool   // nvim_get_mode().blocking
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("Neovim is waiting for the student's input (mode %s): nothing was done", e.Mode)
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Reconnect describes a transparent redial, reported through
// Options.OnReconnect.
type Reconnect struct {
	Socket string
	Count  int    // reconnects so far on this Client, including this one
	Reason string // why the previous connection ended
	At     time.Time
}

// Options tune a Client. The zero value is usable.
type Options struct {
	// CallTimeout bounds each operation when the caller's context has no
	// earlier deadline. Default DefaultCallTimeout.
	CallTimeout time.Duration
	// DialTimeout bounds connecting (and the version check). Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// OnReconnect, if set, is called synchronously from the goroutine whose
	// call triggered a successful redial, before that call proceeds. Keep it
	// quick.
	OnReconnect func(Reconnect)
	// Logf receives go-client's internal log lines, each sanitized to one
	// line (they quote what the server sent). Default: discarded.
	Logf func(format string, args ...any)
}

// Client is a connection to one Neovim socket with lazy reconnect. It is
// safe for concurrent use.
type Client struct {
	socket string
	opts   Options

	mu         sync.Mutex
	sess       *session
	closed     bool
	reconnects int
	lastReason string // why the last session ended, for Reconnect.Reason
	connected  bool   // a session was ever made (the next one is a reconnect)
}

// session is one connection. It is replaced, never repaired.
type session struct {
	v    *gonvim.Nvim
	conn net.Conn
	dead atomic.Bool
	// why records the first reason the session died; refused is set when
	// that reason is a message rpcguard refused.
	whyMu   sync.Mutex
	why     string
	refused error
}

func (s *session) kill(why string) {
	s.whyMu.Lock()
	if s.why == "" {
		s.why = why
	}
	s.whyMu.Unlock()
	s.dead.Store(true)
	// Closing the socket makes go-client's reader fail, which fails every
	// pending call at once; Nvim.Close would also wait for the reader.
	_ = s.conn.Close()
}

// refusal is the rpcguard error that ended the session, if one did.
func (s *session) refusal() error {
	s.whyMu.Lock()
	defer s.whyMu.Unlock()
	return s.refused
}

// guardedConn is the session's reading side: rpcguard checks each message
// before go-client sees it, and a refusal is recorded as the session's
// reason before go-client fails the pending calls with "session closed".
type guardedConn struct {
	watchedConn
	g *rpcguard.Reader
}

func (c guardedConn) Read(p []byte) (int, error) {
	n, err := c.g.Read(p)
	if err != nil {
		c.s.markDead(err)
	}
	return n, err
}

func (s *session) reason() string {
	s.whyMu.Lock()
	defer s.whyMu.Unlock()
	if s.why == "" {
		return "connection lost"
	}
	return s.why
}

// watchedConn marks its session dead as soon as a read or write fails, so
// the next call redials instead of failing on a known-dead connection.
type watchedConn struct {
	net.Conn
	s *session
}

func (w watchedConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if err != nil {
		w.s.markDead(err)
	}
	return n, err
}

func (w watchedConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil {
		w.s.markDead(err)
	}
	return n, err
}

func (s *session) markDead(err error) {
	s.whyMu.Lock()
	if s.why == "" {
		if errors.Is(err, rpcguard.ErrRefused) {
			s.why, s.refused = err.Error(), err
		} else if errors.Is(err, io.EOF) {
			s.why = "Neovim closed the connection (exited or restarted)"
		} else {
			s.why = "connection error: " + err.Error()
		}
	}
	s.whyMu.Unlock()
	s.dead.Store(true)
}

// Dial connects to the Neovim listening on socketPath and checks that it
// speaks at least the Neovim 0.7 API.
func Dial(ctx context.Context, socketPath string, opts Options) (*Client, error) {
	c := New(socketPath, opts)
	s, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.sess = s
	c.connected = true
	return c, nil
}

// New returns a Client for the Neovim on socketPath that connects at its
// first call: a Neovim that is not running (yet) fails only the calls that
// need it, with ErrUnavailable.
func New(socketPath string, opts Options) *Client {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	return &Client{socket: socketPath, opts: opts}
}

// Connect makes sure the Client has a live connection, dialing if the last
// one ended; it sends nothing over a connection that is still up.
func (c *Client) Connect(ctx context.Context) error {
	_, err := c.current(ctx)
	return err
}

// Reconnects is how many times the Client has transparently redialled.
func (c *Client) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// Close drops the connection; later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.sess != nil {
		c.sess.kill("client closed")
		c.sess = nil
	}
	return nil
}

func (c *Client) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

func (c *Client) dial(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()

	// Opened without following a symlink and connected through the open
	// descriptor: the socket directory is writable from the container, and
	// a symlink renamed over n.sock must not send us to a host nvim.
	raw, err := unixpin.Dial(ctx, c.socket)
	if err != nil {
		if errors.Is(err, unixpin.ErrSymlink) || errors.Is(err, unixpin.ErrNotSocket) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		// Neovim 0.7 does not replace a stale socket file: a restarted nvim
		// whose n.sock was left behind listens on a random address instead.
		return nil, fmt.Errorf("%w: %w (if Neovim was restarted, a stale socket file must be removed before it starts)", ErrUnavailable, err)
	}
	s := &session{conn: raw}
	conn := watchedConn{Conn: raw, s: s}
	in := guardedConn{watchedConn: conn, g: rpcguard.NewReader(conn, rpcguard.Options{})}
	v, err := gonvim.New(in, conn, conn, termtext.Logf(c.opts.Logf))
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("nvim: set up RPC on %s: %w", c.socket, err)
	}
	s.v = v
	go func() {
		if err := v.Serve(); err != nil {
			c.logf("nvim: serve %s: %s", c.socket, termtext.Line(err.Error(), termtext.MaxLogLine))
		}
		s.markDead(io.EOF)
	}()

	// nvim_get_api_info is a fast function: it answers even while Neovim
	// waits at a prompt, so dialing never blocks on the student.
	var info struct {
		Channel int `msgpack:",array"`
		Meta    struct {
			Version struct {
				APILevel int `msgpack:"api_level"`
				Major    int `msgpack:"major"`
				Minor    int `msgpack:"minor"`
				Patch    int `msgpack:"patch"`
			} `msgpack:"version"`
		}
	}
	if err := s.run(ctx, func(v *gonvim.Nvim) error {
		return v.Request("nvim_get_api_info", &info)
	}); err != nil {
		s.kill("handshake failed")
		return nil, fmt.Errorf("nvim: handshake on %s: %w", c.socket, err)
	}
	if lvl := info.Meta.Version.APILevel; lvl < minAPILevel {
		s.kill("API too old")
		return nil, fmt.Errorf("nvim: %s runs Neovim %d.%d.%d (API level %d); need 0.7 or newer",
			c.socket, info.Meta.Version.Major, info.Meta.Version.Minor, info.Meta.Version.Patch, lvl)
	}
	return s, nil
}

// current returns a live session, redialling if the last one died.
func (c *Client) current(ctx context.Context) (*session, error) {
	s, report, err := c.currentLocked(ctx)
	if report != nil && c.opts.OnReconnect != nil {
		c.opts.OnReconnect(*report) // outside c.mu: it may call back into c
	}
	return s, err
}

func (c *Client) currentLocked(ctx context.Context) (*session, *Reconnect, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	if c.sess != nil && !c.sess.dead.Load() {
		return c.sess, nil, nil
	}
	if c.sess != nil {
		c.lastReason = c.sess.reason()
		c.sess.kill("replaced")
		c.sess = nil
	}
	// Dialing under c.mu makes concurrent callers share one redial.
	s, err := c.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.sess = s
	if !c.connected {
		c.connected = true
		return s, nil, nil
	}
	c.reconnects++
	return s, &Reconnect{Socket: c.socket, Count: c.reconnects, Reason: c.lastReason, At: time.Now()}, nil
}

// run calls fn under ctx: if ctx ends first, the connection is closed, which
// makes fn return promptly.
func (s *session) run(ctx context.Context, fn func(*gonvim.Nvim) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.kill("a previous call timed out") })
	err := fn(s.v)
	if !stop() {
		// The deadline fired. A result that arrived first is still good.
		if err == nil {
			return nil
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Neovim is there but does not answer: hung, busy, or stopped.
			return fmt.Errorf("%w: no answer from Neovim in time: %w", ErrUnavailable, ctx.Err())
		}
		return fmt.Errorf("no answer from Neovim in time: %w", ctx.Err())
	}
	if err != nil && (errors.Is(err, rpc.ErrClosed) || s.dead.Load()) {
		if r := s.refusal(); r != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, r)
		}
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, s.reason(), err)
	}
	if err != nil {
		// What Neovim answered with (or go-client made of it): the
		// server's text, so one clean line.
		return &ServerError{Msg: termtext.Line(err.Error(), maxServerError), err: err}
	}
	return nil
}

// guard says what state an operation tolerates.
type guard int

const (
	// guardHang refuses only states in which a non-fast request would wait
	// for the student (prompts, pending keys). Reads use it: in command-line
	// mode, input() and getchar() Neovim 0.7 still serves requests.
	guardHang guard = iota
	// guardInput also refuses command-line modes (":", "/", input(), Ex
	// mode): an edit or command would interleave with what the student is
	// typing, and nvim_exec output is lost there.
	guardInput
)

// blocked reports whether m forbids an operation with guard g.
func blocked(m gonvim.Mode, g guard) bool {
	if m.Blocking {
		return true
	}
	if len(m.Mode) > 0 && m.Mode[0] == 'r' { // hit-enter, -- More --, confirm()
		return true
	}
	return g == guardInput && len(m.Mode) > 0 && m.Mode[0] == 'c'
}

// do runs fn on a live session under the Client's call timeout. Idempotent
// operations are retried once on a fresh connection if the old one turned
// out to be dead (Neovim exited or restarted between calls).
func (c *Client) do(ctx context.Context, op string, idempotent bool, fn func(context.Context, *session) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	once := func() error {
		s, err := c.current(ctx)
		if err != nil {
			return err
		}
		return fn(ctx, s)
	}
	err := once()
	if err != nil && idempotent && errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		err = once()
	}
	if err != nil {
		var be *BlockedError
		if errors.As(err, &be) {
			return err // already says what happened, in the student's terms
		}
		return fmt.Errorf("nvim %s: %w", op, err)
	}
	return nil
}

// mode asks nvim_get_mode, a fast function Neovim answers even while it
// waits for a key.
func (s *session) mode(ctx context.Context) (gonvim.Mode, error) {
	var m gonvim.Mode
	if err := s.run(ctx, func(v *gonvim.Nvim) error { return v.Request("nvim_get_mode", &m) }); err != nil {
		return m, fmt.Errorf("get mode: %w", err)
	}
	return m, nil
}

// call is do with the mode checked against g first.
func (c *Client) call(ctx context.Context, op string, g guard, idempotent bool, fn func(*gonvim.Nvim) error) error {
	return c.do(ctx, op, idempotent, func(ctx context.Context, s *session) error {
		m, err := s.mode(ctx)
		if err != nil {
			return err
		}
		if blocked(m, g) {
			return &BlockedError{Mode: m.Mode, Blocking: m.Blocking}
		}
		return s.run(ctx, fn)
	})
}

// Mode is Neovim's current mode (nvim_get_mode, which Neovim answers even
// while it waits for input).
type Mode struct {
	Mode     string `json:"mode"`
	Blocking bool   `json:"blocking"`
}

// Mode returns the current mode without touching anything else.
func (c *Client) Mode(ctx context.Context) (Mode, error) {
	var m gonvim.Mode
	err := c.do(ctx, "mode", true, func(ctx context.Context, s *session) (err error) {
		m, err = s.mode(ctx)
		return err
	})
	if err != nil {
		return Mode{}, err
	}
	return Mode{Mode: m.Mode, Blocking: m.Blocking}, nil
}
