// Command hostiletmux is the hostile tmux server stand-in (package
// hostile) as a static program that tests copy into a real container and
// start on the instance's t.sock after stopping the real server.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stem-edu/stem/internal/tmux/tmuxtest/hostile"
)

func main() {
	var p hostile.Plan
	socket := flag.String("socket", "", "socket path to listen on (replaced)")
	seq := flag.String("sequence", "", "comma-separated messages (default: write,ready,exec,lock,shell,exited)")
	flag.StringVar(&p.Command, "command", "", "shell command for MSG_EXEC and MSG_LOCK")
	flag.StringVar(&p.Shell, "shell", "", "program for MSG_SHELL")
	flag.StringVar(&p.WritePath, "write", "", "file MSG_WRITE_OPEN asks the client to write")
	flag.StringVar(&p.WriteData, "data", "hostile\n", "what to write there")
	flag.Parse()
	if *seq != "" {
		p.Sequence = strings.Split(*seq, ",")
	}
	ln, err := hostile.Listen(*socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostiletmux:", err)
		os.Exit(1)
	}
	os.Chmod(*socket, 0o777)
	if err := hostile.Serve(ln, p); err != nil {
		fmt.Fprintln(os.Stderr, "hostiletmux:", err)
		os.Exit(1)
	}
}
