package cmdutil

import (
	"os"

	"golang.org/x/term"
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
