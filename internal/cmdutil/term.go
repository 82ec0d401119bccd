package cmdutil

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/stem-edu/stem/internal/engine"
)

// RawTerminal puts in (when it is a terminal) into raw mode and returns the
// function that restores it; for interactive exec and attach.
func RawTerminal(in *os.File) (restore func(), err error) {
	fd := int(in.Fd())
	if !term.IsTerminal(fd) {
		return func() {}, nil
	}
	st, err := term.MakeRaw(fd)
	if err != nil {
		return nil, err
	}
	return func() { term.Restore(fd, st) }, nil
}

// WatchSize reports f's terminal size now and after every SIGWINCH until
// stop is called. For a file that is not a terminal it returns nil.
func WatchSize(f *os.File) (<-chan engine.TermSize, func()) {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return nil, func() {}
	}
	out := make(chan engine.TermSize, 1)
	send := func() {
		w, h, err := term.GetSize(fd)
		if err != nil {
			return
		}
		select { // keep only the latest size
		case <-out:
		default:
		}
		out <- engine.TermSize{Rows: h, Cols: w}
	}
	send()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				send()
			}
		}
	}()
	return out, func() { signal.Stop(winch); close(done) }
}
