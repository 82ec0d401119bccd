// Package iostreams carries the standard streams into commands so they can
// be tested without a process (the GitHub CLI's pattern).
package iostreams

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's input and outputs.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		inTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		outTTY: term.IsTerminal(int(os.Stdout.Fd())),
	}
}

// Test returns streams backed by buffers: (streams, stdin, stdout, stderr).
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdinTTY and IsStdoutTTY report whether the stream is a terminal.
func (s *IOStreams) IsStdinTTY() bool  { return s.inTTY }
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// File returns the underlying *os.File of In when it is one (attach needs it
// to put the terminal in raw mode).
func (s *IOStreams) InFile() (*os.File, bool) {
	f, ok := s.In.(*os.File)
	return f, ok
}
