// Command stem-dial is the ProxyCommand of the teacher's MCP entries: it
// carries one ssh connection to HOST PORT over a socket tuned for SSH's
// handshake (package tcprelay). It is `stemctl teacher dial` without
// stemctl's start-up cost: ssh starts one per connection, and a teacher
// polling a class starts dozens at once.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stem-edu/stem/internal/tcprelay"
)

const usage = `usage: stem-dial HOST PORT

ssh runs this as its ProxyCommand ("stemctl teacher config" writes it):
  ssh -o "ProxyCommand=/usr/local/bin/stem-dial '%h' %p" ...
HOST may be an IPv6 address, bare or in brackets.`

func main() {
	if len(os.Args) != 3 {
		os.Stderr.WriteString(usage + "\n")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tcprelay.Run(ctx, tcprelay.TrimBrackets(os.Args[1]), os.Args[2], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stem-dial:", err)
		os.Exit(1)
	}
}
