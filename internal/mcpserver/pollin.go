package mcpserver

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pollableInput is the session's input as a file the Go runtime's poller
// waits on, when in is a pipe or a socket: os.Stdin is left in blocking
// mode, so each read holds a thread in a read(2) and the runtime's monitor
// keeps waking every 20 µs to hand that thread's processor on, which cost
// a stdio session more CPU per request than serving it. A pipe is opened
// again (a description of its own, whose flags are ours); a socket's
// description gets O_NONBLOCK while it is served, and its mode back after.
// Anything else (a terminal, a file) is read as it is. done releases what
// was opened.
func pollableInput(in io.Reader) (r io.Reader, done func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return in, func() {}
	}
	fd := -1
	sc.Control(func(p uintptr) { fd = int(p) }) // Fd would set blocking mode
	var st unix.Stat_t
	if fd < 0 || unix.Fstat(fd, &st) != nil {
		return in, func() {}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		nfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return in, func() {}
		}
		nf := os.NewFile(uintptr(nfd), f.Name())
		return nf, func() { nf.Close() }
	case unix.S_IFSOCK:
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return in, func() {}
		}
		nb := fl&unix.O_NONBLOCK != 0
		nfd, err := unix.Dup(fd)
		if err != nil {
			return in, func() {}
		}
		unix.CloseOnExec(nfd)
		if err := unix.SetNonblock(nfd, true); err != nil {
			unix.Close(nfd)
			return in, func() {}
		}
		nf := os.NewFile(uintptr(nfd), f.Name())
		return nf, func() {
			nf.Close()
			if !nb {
				unix.SetNonblock(fd, false)
			}
		}
	}
	return in, func() {}
}
