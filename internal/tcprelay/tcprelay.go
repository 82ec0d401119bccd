// Package tcprelay carries an SSH connection for ssh's ProxyCommand over a
// TCP socket tuned for SSH's handshake.
//
// OpenSSH turns Nagle's algorithm off only for interactive (tty) sessions.
// Its handshake often sends two small packets back to back while the peer
// has nothing to answer, so the second waits for a delayed ACK (40 ms on
// Linux); a connection for one MCP session pays that three times, which
// is most of its time on a LAN. The relay's socket has Nagle off
// (TCP_NODELAY, Go's default) and acknowledges at once (TCP_QUICKACK,
// re-armed after every read because Linux clears it), which removes the
// stalls on both sides. The bytes are SSH's own encrypted stream: the
// relay sees nothing the network does not.
package tcprelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// DialTimeout bounds the TCP connect (ssh's ConnectTimeout does not reach
// a ProxyCommand).
const DialTimeout = 30 * time.Second

// CloseGrace is how long the server may still answer after ssh closed its
// end. ssh closes it only when it exits (then it also sends SIGHUP, unless
// it was killed), so nobody reads what comes later; the limit keeps a
// relay to a server that never closes from outliving ssh.
const CloseGrace = 5 * time.Second

// errSSHGone ends a connect that ssh no longer waits for.
var errSSHGone = errors.New("ssh closed its end before the connection was made")

// TrimBrackets takes the brackets off an IPv6 address written [addr], as
// ssh's %h may give it.
func TrimBrackets(host string) string {
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		return host[1 : len(host)-1]
	}
	return host
}

// Run connects to host:port and copies in to the connection and the
// connection to out until the server closes it. The end of in half-closes
// the connection; the server's answer is copied for CloseGrace more. An
// end of in before the connection is made (ssh gave up or was killed)
// stops the connect.
func Run(ctx context.Context, host, port string, in io.Reader, out io.Writer) error {
	addr := net.JoinHostPort(host, port)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// ssh writes its version line at once, before the server answers, so
	// in is read from the start: that is how its end shows up during a
	// slow connect. The first chunk waits for the connection.
	connected := make(chan *net.TCPConn, 1)
	upErr := make(chan error, 1)
	go func() { upErr <- upload(ctx, cancel, in, connected) }()

	d := net.Dialer{Timeout: DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.SetNoDelay(true); err != nil {
		return fmt.Errorf("%s: set TCP_NODELAY: %w", addr, err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	quickAck(raw)
	connected <- conn

	buf := make([]byte, 64<<10)
	for {
		n, rerr := conn.Read(buf)
		quickAck(raw)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return fmt.Errorf("write to ssh: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				return nil // ssh is gone and the server did not close
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			select {
			case err := <-upErr:
				if err != nil {
					return fmt.Errorf("send to %s: %w", addr, err)
				}
			default:
			}
			return fmt.Errorf("receive from %s: %w", addr, rerr)
		}
	}
}

// maxPending bounds what is kept of ssh's bytes while the connect is under
// way (ssh sends its version line and key exchange offer, a few KiB).
const maxPending = 1 << 20

type chunk struct {
	b   []byte
	err error
}

// upload copies in to the connection once it arrives on connected, keeping
// what ssh sends before that. At the end of in it half-closes the
// connection and gives the server CloseGrace to finish; before the
// connection is made it cancels the connect.
func upload(ctx context.Context, cancel context.CancelCauseFunc, in io.Reader, connected <-chan *net.TCPConn) error {
	reads := make(chan chunk)
	next := make(chan struct{}, 1) // the reader may reuse its buffer
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			select {
			case reads <- chunk{buf[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
		}
	}()

	var conn *net.TCPConn
	var pending []byte
	for conn == nil {
		r := reads
		if len(pending) >= maxPending {
			r = nil
		}
		select {
		case conn = <-connected:
		case c := <-r:
			pending = append(pending, c.b...)
			if c.err != nil {
				cancel(errSSHGone)
				return nil
			}
			next <- struct{}{}
		case <-ctx.Done():
			return nil
		}
	}
	if len(pending) > 0 {
		if _, err := conn.Write(pending); err != nil {
			return err
		}
	}
	for {
		var c chunk
		select {
		case c = <-reads:
		case <-ctx.Done():
			return nil
		}
		if len(c.b) > 0 {
			if _, err := conn.Write(c.b); err != nil {
				return err
			}
		}
		if c.err == nil {
			next <- struct{}{}
			continue
		}
		err := c.err
		if errors.Is(err, io.EOF) {
			err = conn.CloseWrite()
		}
		conn.SetReadDeadline(time.Now().Add(CloseGrace))
		return err
	}
}
