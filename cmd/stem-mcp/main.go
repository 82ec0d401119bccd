// Command stem-mcp is the MCP server over the student's session, the SSH
// forced-command gate in front of it, and the gdb bridge that runs inside
// containers. All logic lives in internal/; this file only wires the process.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpcmd"
	"github.com/stem-edu/stem/internal/termtext"
)

func main() {
	cardgit.Helper()
	ios := iostreams.System()
	// A client that went away (a teacher's dropped SSH connection) must
	// cost a write error, not the process: the session still has its
	// session_end to write to the audit log.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	cmd := mcpcmd.NewCmdRoot(ios, os.Getenv)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.Code)
	}
	fmt.Fprintf(ios.ErrOut, "stem-mcp: %s\n", termtext.String(err.Error()))
	if cmdutil.IsFlagError(err) {
		os.Exit(2)
	}
	os.Exit(1)
}
