// Command stemctl is the host CLI: it runs student tasks in per-task
// containers and connects agents to the same session. All logic lives in
// internal/; this file only wires the process to it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cmd/factory"
	"github.com/stem-edu/stem/internal/cmd/root"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/termtext"
)

func main() {
	cardgit.Helper()
	os.Exit(run())
}

func run() int {
	f := factory.New()
	cmd := root.NewCmdRoot(f)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// The user's Ctrl-C: what was half-made is undone by the command.
		fmt.Fprintln(f.IOStreams.ErrOut, "stemctl: interrupted")
		return 130
	}
	// An error may quote a container's server or files: printed clean.
	fmt.Fprintf(f.IOStreams.ErrOut, "stemctl: %s\n", termtext.String(err.Error()))
	if cmdutil.IsFlagError(err) {
		if c, _, ferr := cmd.Find(os.Args[1:]); ferr == nil && c != nil {
			fmt.Fprintf(f.IOStreams.ErrOut, "\nUsage:\n  %s\n", c.UseLine())
		}
		return 2
	}
	return 1
}
