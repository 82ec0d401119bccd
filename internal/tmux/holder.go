package tmux

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// A control client is three descriptors to the server: the connection
// and the two pipes it hands over (stdin for commands, stdout for the
// control stream). How it ends decides whether the student's server
// lives. When the connection closes first, tmux drops the client at once
// with everything it had queued for it. When stdin reaches its end, or
// stdout fails, while the connection is still open, tmux marks the client
// as exiting but keeps it: pane output that arrives then is skipped over
// while output queued earlier is still waiting, and the next write of
// that queued output finds its bytes gone, fatalx("not enough data"), and
// the server exits with every window of the session. tmux 3.3a does this,
// and the code is unchanged in 3.7c; it takes a client that is behind
// (the server holds output for it) and a pane that prints.
//
// So stem ends its clients by the connection (Client.Close), and a holder
// keeps a second copy of this process's ends of both pipes open in a
// process of its own, for when this one dies without closing anything
// (SIGKILL, a crash): the kernel then closes the process's descriptors in
// an order stem does not choose, and tmux sees the pipes end, after the
// connection, only once the holder lets them go.

// holderScript waits for the lifeline (fd 3) to end, then reads the
// control stream (fd 0) to its end, which comes when the server has
// dropped the client and closed its end; exiting then closes the last
// copy of stdin's write end (fd 4). While the lifeline lasts it reads
// nothing: the control stream is ours.
const holderScript = `read _ <&3; exec /bin/cat >/dev/null`

// holder is the process that keeps the pipes' ends.
type holder struct {
	lifeline *os.File // its write end; closing it lets the holder go
}

// startHolder starts a holder of stdinW and stdoutR. It runs in a process
// group of its own, so a signal to ours (Ctrl-C, Ctrl-Z in a terminal, a
// kill of the group) does not reach it.
func startHolder(stdinW, stdoutR *os.File) (*holder, error) {
	// The holder gets ends of its own (reopen): handed ours, exec would
	// put them in blocking mode (os.File.Fd), and every read of the
	// control stream would leave Go's poller for a blocking system call,
	// which doubles a capture's time.
	out, err := reopen(stdoutR, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	in, err := reopen(stdinW, syscall.O_WRONLY)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	lr, lw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("tmux: the holder's lifeline: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", holderScript)
	cmd.Stdin = out
	cmd.ExtraFiles = []*os.File{lr, in}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	lr.Close()
	if err != nil {
		lw.Close()
		return nil, fmt.Errorf("tmux: starting the holder of the control pipes: %w", err)
	}
	go cmd.Wait() // reaped whenever it ends; nothing waits for it
	return &holder{lifeline: lw}, nil
}

// release lets the holder go: it reads the control stream to its end (at
// once when the server has already dropped the client) and exits. A nil
// holder (a client that has none) has nothing to release.
func (h *holder) release() {
	if h != nil {
		h.lifeline.Close()
	}
}

// reopen opens the pipe end f anew through /proc/self/fd: the same pipe,
// another open file description, so its mode (blocking, for the holder's
// shell) is not f's.
func reopen(f *os.File, mode int) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("tmux: the holder's copy of %s: %w", f.Name(), err)
	}
	fd := -1
	var oerr error
	if err := rc.Control(func(p uintptr) {
		fd, oerr = syscall.Open("/proc/self/fd/"+strconv.Itoa(int(p)), mode|syscall.O_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("tmux: the holder's copy of %s: %w", f.Name(), err)
	}
	if oerr != nil {
		return nil, fmt.Errorf("tmux: the holder's copy of %s (through /proc/self/fd): %w", f.Name(), oerr)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
