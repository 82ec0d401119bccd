package tmux

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Options configure Dial.
type Options struct {
	// Socket is the tmux server socket (t.sock). Required.
	Socket string
	// Session is the session to attach to; default "stem".
	Session string
	// Command, when set, is the argv prefix of a tmux client program to
	// run instead of the client spoken in Go (see wire.go); it is for a
	// client that runs inside the server's container, e.g. ["podman",
	// "exec", "-i", CID, "tmux"], where obeying the server harms only the
	// container. Never name the host's tmux here: a tmux client executes
	// what its server tells it to. Dial appends "-u -N -S SOCKET -C
	// attach-session -t =SESSION -f ignore-size" (-N: never start a server
	// on a missing socket).
	Command []string
	// AllowVersionMismatch skips the check that a Command client's
	// `tmux -V` equals the server's #{version}. The protocol check (the
	// server refusing the client) still applies. The Go client speaks
	// tmux's protocol version 8 (tmux 2.x to 3.5) and has no version of
	// its own to compare.
	AllowVersionMismatch bool
	// CommandTimeout bounds a call whose context has no deadline;
	// default 10s.
	CommandTimeout time.Duration
	// MaxResponse bounds one response in bytes; a larger one closes the
	// connection (ErrProtocol). Default 64 MiB.
	MaxResponse int
	// Shells are the pane_current_command values Run accepts as "the pane
	// is at a shell"; default ["bash"].
	Shells []string
	// ProbeTimeout bounds Run's wait for the prompt probe answer; default 3s.
	ProbeTimeout time.Duration
	// SocketInContainer says Command runs the client inside the server's
	// container (podman exec), where a descriptor from this host cannot
	// follow; the client there connects by path, which can only reach the
	// container's own sockets. Otherwise the client is handed the socket
	// opened without following symlinks (see package unixpin), and a
	// symlink at Socket is refused.
	SocketInContainer bool
}

// Client is one persistent control-mode connection (one tmux client
// process) to a tmux server. Its methods are safe for concurrent use;
// commands reach tmux one request at a time, in order.
type Client struct {
	opts          Options
	session       string // the attached session's id, "$N"
	serverVersion string
	serverID      string // pid and start time, see ServerID

	peer  peer
	stdin *os.File

	wmu sync.Mutex // serialises writes and keeps pending in write order

	mu      sync.Mutex
	pending []*request
	subs    map[*Subscription]struct{}
	taps    map[uint64]tap
	tapSeq  uint64
	closed  bool
	err     error
	paneMu  map[PaneID]*sync.Mutex

	done    chan struct{}
	closing chan struct{}
	once    sync.Once

	// attached is closed at the first %session-changed: attach-session
	// has run. The server reads our stdin as soon as the client identifies
	// itself, so a command written earlier could run before the attach
	// (and keys sent then were seen to go missing).
	attached     chan struct{}
	attachedSeen bool // reader goroutine only
	// exitReason is the text of %exit, which the client prints last
	// ("server exited", "detached", ...); reader goroutine only.
	exitReason string

	// settling, when set (tests only), is called as Run starts waiting for
	// a pane that reads "tmux" to run its shell.
	settling func()
}

type request struct {
	nonce string
	cmd   string
	done  chan response
}

type response struct {
	blocks []block
	err    error
}

const (
	defaultSession        = "stem"
	defaultCommandTimeout = 10 * time.Second
	defaultMaxResponse    = 64 << 20
	maxLine               = 64 << 20
)

// Dial starts a control-mode client attached to opts.Session, checks that
// it talks to the server and that the versions agree, and returns it. ctx
// bounds the dial only, not the connection's lifetime.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	if opts.Session == "" {
		opts.Session = defaultSession
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = defaultCommandTimeout
	}
	if opts.MaxResponse <= 0 {
		opts.MaxResponse = defaultMaxResponse
	}
	if len(opts.Shells) == 0 {
		opts.Shells = []string{"bash"}
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 3 * time.Second
	}
	if opts.Socket == "" || !strings.HasPrefix(opts.Socket, "/") {
		return nil, fmt.Errorf("%w: socket path %q must be absolute", ErrInvalidArgument, opts.Socket)
	}
	if len(opts.Socket) >= 108 {
		return nil, fmt.Errorf("%w: socket path is %d bytes, over the AF_UNIX limit", ErrInvalidArgument, len(opts.Socket))
	}
	if !validSession(opts.Session) {
		return nil, fmt.Errorf("%w: session name %q", ErrInvalidArgument, opts.Session)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.CommandTimeout)
		defer cancel()
	}

	var clientVersion string
	if len(opts.Command) > 0 && !opts.AllowVersionMismatch {
		v, err := clientVersionOf(ctx, opts.Command)
		if err != nil {
			return nil, err
		}
		clientVersion = v
	}

	// tmux 3.3a crashes (a NULL dereference in control_stop) when a control
	// client goes away before the server has finished identifying it, and
	// many clients attaching at once make that window long (30 concurrent
	// sessions that ended at once killed the student's server). So attaches
	// to one server are serialized across processes with a lock beside the
	// socket, and Close never detaches a client that has not attached yet.
	unlock, err := lockAttach(ctx, opts.Socket)
	if err != nil {
		return nil, err
	}
	c, err := start(ctx, opts)
	if err != nil {
		unlock()
		return nil, err
	}
	select {
	case <-c.attached:
		unlock()
	case <-c.done:
		unlock()
		return nil, c.Err()
	case <-ctx.Done():
		c.Close() // waits for the attach before it detaches
		unlock()
		return nil, fmt.Errorf("tmux: attaching to %s: %w", opts.Socket, ctx.Err())
	}
	out, err := c.command(ctx, "display-message -p "+mustQuote("#{version}\t#{session_id}\t#{pid}\t#{start_time}"))
	if err != nil {
		c.Close()
		if errors.Is(err, ErrClosed) {
			// The client exited: report why (its stderr or the attach error).
			return nil, c.Err()
		}
		return nil, fmt.Errorf("tmux: attaching to %s: %w", opts.Socket, err)
	}
	f := strings.Split(out, "\t")
	if len(f) != 4 || !strings.HasPrefix(f[1], "$") || f[2] == "" {
		c.Close()
		return nil, fmt.Errorf("%w: unexpected handshake answer %q", ErrProtocol, out)
	}
	c.serverVersion, c.session, c.serverID = f[0], f[1], f[2]+"-"+f[3]
	if clientVersion != "" && clientVersion != "tmux "+c.serverVersion {
		c.Close()
		return nil, fmt.Errorf("%w: client %q, server %q", ErrVersionMismatch, clientVersion, "tmux "+c.serverVersion)
	}
	return c, nil
}

// clientVersionOf runs `COMMAND -V`.
func clientVersionOf(ctx context.Context, prefix []string) (string, error) {
	argv := append(append([]string{}, prefix[1:]...), "-V")
	cmd := exec.CommandContext(ctx, prefix[0], argv...)
	cmd.Env = clientEnv()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("tmux: %s -V: %w: %s", strings.Join(prefix, " "), err, bytes.TrimSpace(ee.Stderr))
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("tmux: %s not found (install the Debian package tmux): %w", prefix[0], err)
		}
		return "", fmt.Errorf("tmux: %s -V: %w", strings.Join(prefix, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// clientEnv is our environment without the variables that make a tmux
// client think it runs inside a pane.
func clientEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TMUX=") || strings.HasPrefix(kv, "TMUX_PANE=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the connection lives, then the reason it ended
// (wrapping ErrClosed, and ErrVersionMismatch or ErrNoServer when that is
// the cause).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// ServerVersion is the server's tmux version as read at Dial ("3.3a").
func (c *Client) ServerVersion() string { return c.serverVersion }

// ServerID identifies the server process as read at Dial: its pid and start
// time ("1234-1796100052"). A server started again on the same socket (pane
// ids and history lines then mean other things) has another.
func (c *Client) ServerID() string { return c.serverID }

// SessionID is the id ("$0") of the attached session.
func (c *Client) SessionID() string { return c.session }

// Close detaches and ends the client process. Calls in flight fail with
// ErrClosed.
func (c *Client) Close() error {
	c.once.Do(func() {
		// Never end a client the server is still identifying (see Dial).
		select {
		case <-c.attached:
		case <-c.done:
		case <-time.After(attachGrace):
		}
		close(c.closing)
		// Detaches are serialized with attaches (see Dial): one control
		// client coming or going at a time. The lock is best effort with a
		// bound, so a wedged peer cannot stop us from closing.
		lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
		unlock, lerr := lockAttach(lctx, c.opts.Socket)
		lcancel()
		if lerr == nil {
			defer unlock()
		}
		if wp, ok := c.peer.(wirePeer); ok {
			// The connection ends first, so the server drops the client
			// with all it queued for it; an empty line or the end of stdin
			// would leave it exiting but attached, which can end the
			// server (holder.go). Dropping it closes the control stream.
			wp.kill()
			select {
			case <-c.done:
			case <-time.After(2 * time.Second):
			}
			c.wmu.Lock()
			c.stdin.Close()
			c.wmu.Unlock()
			return
		}
		// A tmux client program inside the container owns the connection:
		// an empty line asks the server to detach it, and the server then
		// ends it; only if it does not do so in time is stdin closed (and
		// the process killed after that).
		c.wmu.Lock()
		c.stdin.SetWriteDeadline(time.Now().Add(time.Second))
		c.stdin.Write([]byte("\n"))
		c.wmu.Unlock()
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			c.wmu.Lock()
			c.stdin.Close()
			c.wmu.Unlock()
			select {
			case <-c.done:
			case <-time.After(2 * time.Second):
				c.peer.kill()
				<-c.done
			}
		}
		c.wmu.Lock()
		c.stdin.Close()
		c.wmu.Unlock()
	})
	return nil
}

// read is the reader goroutine: it owns the stdout pipe and the demux.
func (c *Client) read(r *os.File) {
	d := &demux{
		maxRegion: c.opts.MaxResponse,
		head: func() (string, bool) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.pending) == 0 {
				return "", false
			}
			return c.pending[0].nonce, true
		},
		deliver: func(blocks []block, err error) {
			c.mu.Lock()
			if len(c.pending) == 0 {
				c.mu.Unlock()
				return
			}
			req := c.pending[0]
			c.pending = c.pending[1:]
			c.mu.Unlock()
			req.done <- response{blocks: blocks, err: err}
		},
		notify: c.dispatch,
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var readErr error
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(frag) > maxLine {
				readErr = fmt.Errorf("%w: line over %d bytes", ErrProtocol, maxLine)
				break
			}
			long = append(long, frag...)
			continue
		}
		if err != nil {
			if err != io.EOF {
				readErr = fmt.Errorf("tmux: reading control stream: %w", err)
			}
			break
		}
		line := frag[:len(frag)-1]
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if ferr := d.feed(line); ferr != nil {
			readErr = ferr
			break
		}
	}
	r.Close()
	c.finish(readErr, d.lastError)
}

// finish records why the connection ended and fails everything waiting.
func (c *Client) finish(readErr error, attachErr string) {
	// Stop the process if it is still running (we stopped reading).
	if readErr != nil {
		c.peer.kill()
	}
	waitErr := c.peer.wait()
	stderr := strings.TrimSpace(c.peer.diag())

	var reason error
	switch {
	case errors.Is(waitErr, ErrVersionMismatch), errors.Is(waitErr, ErrProtocol):
		reason = fmt.Errorf("%w: %w", ErrClosed, waitErr)
	case strings.Contains(stderr, "protocol version mismatch"):
		reason = fmt.Errorf("%w: %w: %s", ErrClosed, ErrVersionMismatch, stderr)
	case strings.Contains(stderr, "no server running"), strings.Contains(stderr, "error connecting to"):
		reason = fmt.Errorf("%w: %w: %s", ErrClosed, ErrNoServer, stderr)
	case strings.HasPrefix(attachErr, "can't find session"):
		reason = fmt.Errorf("%w: %w: %s", ErrClosed, ErrNoSession, attachErr)
	case readErr != nil:
		reason = fmt.Errorf("%w: %w", ErrClosed, readErr)
	default:
		detail := stderr
		if detail == "" {
			detail = attachErr
		}
		if detail == "" && c.exitReason != "" {
			detail = "tmux: " + c.exitReason
		}
		select {
		case <-c.closing:
			reason = fmt.Errorf("%w (by Close)", ErrClosed)
		default:
			if detail == "" && waitErr != nil {
				detail = waitErr.Error()
			}
			if detail == "" {
				detail = "the tmux client exited (server killed or session closed?)"
			}
			reason = fmt.Errorf("%w: %s", ErrClosed, detail)
		}
	}

	c.mu.Lock()
	c.closed = true
	c.err = reason
	pending := c.pending
	c.pending = nil
	for s := range c.subs {
		close(s.ch)
	}
	c.subs = map[*Subscription]struct{}{}
	c.mu.Unlock()
	for _, req := range pending {
		req.done <- response{err: reason}
	}
	c.stdin.Close()
	close(c.done)
}

// paneLock serialises operations that drive one pane through several round
// trips (Run, SendKeys).
func (c *Client) paneLock(p PaneID) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.paneMu[p]
	if !ok {
		m = new(sync.Mutex)
		c.paneMu[p] = m
	}
	return m
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// DialOrInside dials with opts (the Go client unless opts.Command is set)
// and, when the server speaks another protocol version, again with
// inside: a tmux client run in the server's container, e.g. ["podman",
// "exec", "-i", CID, "tmux"], which always speaks its server's protocol.
// logf, if set, says which way it went.
func DialOrInside(ctx context.Context, opts Options, inside []string, logf func(string, ...any)) (*Client, error) {
	c, err := Dial(ctx, opts)
	var why string
	switch {
	case errors.Is(err, ErrVersionMismatch):
		why = "tmux versions differ"
	case len(opts.Command) > 0 && (errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)) && !errors.Is(err, ErrNoServer):
		why = "no tmux client on this host"
	default:
		return c, err
	}
	if logf != nil {
		logf("%s (%v); using the container's tmux client", why, err)
	}
	opts.Command = inside
	opts.SocketInContainer = true
	return Dial(ctx, opts)
}
