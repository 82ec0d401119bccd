// Command hostilenvim stands in for a Neovim taken over inside a task
// container: it listens on the socket path it is given (removing what is
// there) and serves nvimtest.Hostile in the given mode. It writes its log
// to -log and creates -ready once it listens. Built static and copied
// into the card by the end-to-end tests.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

func main() {
	sock := flag.String("sock", "", "socket path to listen on")
	mode := flag.String("mode", nvimtest.HostileHuge, "huge or text")
	logPath := flag.String("log", "", "log file")
	ready := flag.String("ready", "", "file to create once listening")
	flag.Parse()
	os.Remove(*sock)
	ln, err := net.Listen("unix", *sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h := &nvimtest.Hostile{Mode: *mode, Log: log}
	fmt.Fprintln(os.Stderr, h.Serve(ln))
}
