package tmux

import (
	"context"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/tmux/imsg"
)

// CommandForTest runs one raw tmux command line on the connection, for
// tests that check our quoting against tmux's own parser.
func (c *Client) CommandForTest(ctx context.Context, cmd string) (string, error) {
	return c.command(ctx, cmd)
}

// OnSettlingForTest has Run call f as it starts waiting for a pane that
// reads "tmux" to run its shell.
func (c *Client) OnSettlingForTest(f func()) { c.settling = f }

// IdentifyForTest sends on conn what a control client's dial sends to
// attach to session: with fdsOnly, only its first stage (the messages
// carrying stdin and stdout).
func IdentifyForTest(conn *net.UnixConn, session string, stdin, stdout *os.File, fdsOnly bool) error {
	w := &wireClient{ic: imsg.NewConn(conn)}
	o := controlOptions("stem-test", session, stdin, stdout)
	if !fdsOnly {
		return w.identify(o)
	}
	fds, _ := identifyMessages(o)
	return w.sendDescriptors(fds)
}

// StdinNonblockForTest reports whether the client's end of the control
// client's stdin is still in non-blocking mode (on Go's poller).
func (c *Client) StdinNonblockForTest() (bool, error) {
	rc, err := c.stdin.SyscallConn()
	if err != nil {
		return false, err
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		return false, err
	}
	return fl&unix.O_NONBLOCK != 0, ferr
}
