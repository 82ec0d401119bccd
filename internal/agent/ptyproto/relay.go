package ptyproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"
)

// RelayOptions configure Relay.
type RelayOptions struct {
	Socket string
	// In and Out are the terminal of the tmux pane the relay runs in.
	In, Out *os.File
	Getenv  func(string) string
	// ConnectTimeout bounds waiting for the socket to accept (default 10 s).
	ConnectTimeout time.Duration
	// NoWait closes at once when the agent ends instead of waiting for a
	// key, so the student can read the agent's last words.
	NoWait bool
}

// Relay connects the pane's terminal to the agent's pseudo terminal until
// the agent exits or the connection closes. It returns the agent's exit
// code when the host reported one.
func Relay(ctx context.Context, o RelayOptions) (int, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	conn, err := dialRetry(ctx, o.Socket, o.ConnectTimeout)
	if err != nil {
		return -1, err
	}
	defer conn.Close()

	rows, cols := 24, 80
	if c, r, err := term.GetSize(int(o.Out.Fd())); err == nil && r > 0 && c > 0 {
		rows, cols = r, c
	}
	if err := WriteJSON(conn, Hello, HelloMsg{Version: Version, Term: o.Getenv("TERM"), Rows: rows, Cols: cols}); err != nil {
		return -1, fmt.Errorf("agent socket %s: %w", o.Socket, err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, p, err := ReadFrame(conn)
	if err != nil {
		return -1, fmt.Errorf("agent socket %s: no answer: %w", o.Socket, err)
	}
	conn.SetReadDeadline(time.Time{})
	var hello HelloMsg
	if typ != Hello || jsonUnmarshal(p, &hello) != nil {
		return -1, fmt.Errorf("agent socket %s: unexpected first frame %q", o.Socket, typ)
	}
	if hello.Error != "" {
		return -1, fmt.Errorf("the agent host refused the connection: %s", hello.Error)
	}
	if hello.Version != Version {
		return -1, fmt.Errorf("the agent host speaks protocol %d, this relay %d: rebuild stemctl and stem-mcp together (make build)", hello.Version, Version)
	}

	inFD := int(o.In.Fd())
	restore := func() {}
	if term.IsTerminal(inFD) {
		st, err := term.MakeRaw(inFD)
		if err != nil {
			return -1, fmt.Errorf("terminal raw mode: %w", err)
		}
		restore = func() { term.Restore(inFD, st) }
	}
	defer func() { restore() }()

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	keys := make(chan []byte, 16)
	go func() {
		defer close(keys)
		buf := make([]byte, 4096)
		for {
			n, err := o.In.Read(buf)
			if n > 0 {
				keys <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()

	type frame struct {
		typ byte
		p   []byte
		err error
	}
	frames := make(chan frame, 16)
	go func() {
		for {
			t, p, err := ReadFrame(conn)
			frames <- frame{t, p, err}
			if err != nil {
				return
			}
		}
	}()

	name := hello.Provider
	if name == "" {
		name = "the agent"
	}
	var msg string
	code := -1
loop:
	for {
		select {
		case k, ok := <-keys:
			if !ok {
				return code, nil // the pane's terminal went away
			}
			if err := WriteData(conn, k); err != nil {
				msg = fmt.Sprintf("[stem] the connection to %s broke: %v", name, err)
				break loop
			}
		case <-winch:
			if c, r, err := term.GetSize(int(o.Out.Fd())); err == nil {
				WriteSize(conn, r, c)
			}
		case f := <-frames:
			if f.err != nil {
				if errors.Is(f.err, io.EOF) || errors.Is(f.err, net.ErrClosed) {
					msg = fmt.Sprintf("[stem] %s's terminal closed (stemctl agent list shows running agents)", name)
				} else {
					msg = fmt.Sprintf("[stem] the connection to %s broke: %v", name, f.err)
				}
				break loop
			}
			switch f.typ {
			case Data:
				if _, err := o.Out.Write(f.p); err != nil {
					return code, nil
				}
			case Exit:
				var ex ExitMsg
				jsonUnmarshal(f.p, &ex)
				code = ex.Code
				switch {
				case ex.Message != "":
					msg = "[stem] " + ex.Message
				case ex.Signal != "":
					msg = fmt.Sprintf("[stem] %s ended (%s)", name, ex.Signal)
				default:
					msg = fmt.Sprintf("[stem] %s exited with status %d", name, ex.Code)
				}
				break loop
			}
		case <-ctx.Done():
			return code, ctx.Err()
		}
	}
	if o.NoWait || !term.IsTerminal(inFD) {
		restore()
		fmt.Fprintf(o.Out, "\r\n%s\r\n", msg)
		return code, nil
	}
	// Keep the window so the student can read the agent's last output.
	fmt.Fprintf(o.Out, "\r\n\x1b[2m%s. Press any key to close this window.\x1b[0m", msg)
	select {
	case <-keys:
	case <-ctx.Done():
	}
	return code, nil
}

func dialRetry(ctx context.Context, sock string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	delay := 10 * time.Millisecond
	for {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := d.DialContext(dctx, "unix", sock)
		cancel()
		if err == nil {
			return conn, nil
		}
		retry := errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
		if !retry || time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to the agent's terminal at %s: %w (is the agent still running? stemctl agent list)", sock, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
