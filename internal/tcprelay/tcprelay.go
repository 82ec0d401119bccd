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
	"time"
)

// DialTimeout bounds the TCP connect (ssh's ConnectTimeout does not reach
// a ProxyCommand).
const DialTimeout = 30 * time.Second

// Run connects to host:port and copies in to the connection and the
// connection to out until the server closes it. The end of in half-closes
// the connection (the server may still answer).
func Run(ctx context.Context, host, port string, in io.Reader, out io.Writer) error {
	addr := net.JoinHostPort(host, port)
	d := net.Dialer{Timeout: DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
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

	upErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		if err == nil {
			err = conn.CloseWrite()
		}
		upErr <- err
	}()
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
			if ctx.Err() != nil {
				return ctx.Err()
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
