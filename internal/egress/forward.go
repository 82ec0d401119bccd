package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Forward runs inside the sandbox: it accepts TCP connections on ln (a
// loopback port the agent's HTTPS_PROXY names) and carries each, byte for
// byte, to the host's proxy on the Unix socket sock. It returns when ctx
// ends or ln fails.
func Forward(ctx context.Context, ln net.Listener, sock string) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("egress forward: accept: %w", err)
		}
		go func() {
			d := net.Dialer{Timeout: 5 * time.Second}
			up, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				c.Close()
				return
			}
			forwardPair(c, up)
		}()
	}
}

// forwardPair copies both ways, half-closing as each side ends.
func forwardPair(a, b net.Conn) {
	defer a.Close()
	defer b.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}
