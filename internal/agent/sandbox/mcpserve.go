package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"
)

// MaxMCPSessions bounds the stem-mcp processes one sandbox can have the
// host run at once (a CLI opens one; a few for restarts).
const MaxMCPSessions = 4

// ServeMCP accepts connections on ln (the sandbox's MCP socket) and runs
// argv (the host's `stem-mcp serve --level L --instance I --agent ID`) for
// each, with the connection as its standard input and output. A connection
// over MaxMCPSessions waits for a free slot. It returns when ctx ends;
// the running servers are then ended too.
func ServeMCP(ctx context.Context, ln *net.UnixListener, argv, env []string, logw io.Writer) error {
	if len(argv) == 0 {
		return errors.New("sandbox: no MCP server command")
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	slots := make(chan struct{}, MaxMCPSessions)
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("sandbox: accept on the MCP socket: %w", err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			c.Close()
			return nil
		}
		go func() {
			defer func() { <-slots }()
			if err := runMCP(ctx, c, argv, env, logw); err != nil && logw != nil {
				fmt.Fprintf(logw, "stem-mcp for the sandbox: %v\n", err)
			}
		}()
	}
}

// runMCP runs one server on the connection. The process gets the socket
// itself as stdin and stdout (no copying in between).
func runMCP(ctx context.Context, c *net.UnixConn, argv, env []string, logw io.Writer) error {
	defer c.Close()
	f, err := c.File()
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout = f, f
	cmd.Stderr = logw
	if logw == nil {
		cmd.Stderr = io.Discard
	}
	cmd.WaitDelay = 2 * time.Second
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	// The descriptors now belong to the child too; ours are not needed.
	f.Close()
	c.Close()
	return cmd.Wait()
}
