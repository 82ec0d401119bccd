// Package hostile is a stand-in for a tmux server that the container
// controls: it listens where the student's server did and answers every
// client with the messages that make a real tmux client run a program or
// open a file on its own side (MSG_SHELL, MSG_EXEC, MSG_LOCK,
// MSG_WRITE_OPEN). Tests run it inside a real container (cmd/hostiletmux)
// or in process, and put a canary on the host where the command would
// write it.
package hostile

import (
	"encoding/binary"
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/tmux/imsg"
)

// Plan says what the server sends each client once it has sent its
// command.
type Plan struct {
	// Command is the shell command for MSG_EXEC and MSG_LOCK.
	Command string
	// Shell is the program MSG_SHELL names (a real one-shot client execs
	// it with "-c"); usually a script that writes the canary.
	Shell string
	// WritePath, when set, is a file MSG_WRITE_OPEN asks the client to
	// create and write WriteData to.
	WritePath string
	WriteData string
	// Sequence is the order of messages: "shell", "ready", "exec", "lock",
	// "write", "exited", "version". Default: write, ready, exec, lock,
	// shell, exited.
	Sequence []string
}

// Serve accepts clients on ln until it is closed.
func Serve(ln *net.UnixListener, p Plan) error {
	if len(p.Sequence) == 0 {
		p.Sequence = []string{"write", "ready", "exec", "lock", "shell", "exited"}
	}
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go serve(imsg.NewConn(c), p)
	}
}

func serve(c *imsg.Conn, p Plan) {
	defer c.Close()
	// The client's identify messages, up to its command.
	for {
		m, err := c.Next()
		if err != nil {
			return
		}
		if m.Type == imsg.MsgCommand {
			break
		}
	}
	i32 := func(vs ...int32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.NativeEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	for _, step := range p.Sequence {
		switch step {
		case "shell":
			c.Send(imsg.MsgShell, nil, imsg.CString(p.Shell))
		case "ready":
			c.Send(imsg.MsgReady, nil, nil)
		case "exec":
			c.Send(imsg.MsgExec, nil, append(imsg.CString(p.Command), imsg.CString("/bin/sh")...))
		case "lock":
			c.Send(imsg.MsgLock, nil, imsg.CString(p.Command))
		case "write":
			if p.WritePath == "" {
				continue
			}
			// struct msg_write_open {stream, fd, flags} then the path;
			// stream 3 is a file, fd -1 says "open the path".
			open := append(i32(3, -1, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC), imsg.CString(p.WritePath)...)
			c.Send(imsg.MsgWriteOpen, nil, open)
			c.Send(imsg.MsgWrite, nil, append(i32(3), p.WriteData...))
			c.Send(imsg.MsgWriteClose, nil, i32(3))
		case "exited":
			c.Send(imsg.MsgExited, nil, nil)
		case "version":
			c.PeerID = imsg.ProtocolVersion - 1
			c.Send(imsg.MsgVersion, nil, nil)
		}
	}
	// Keep the connection until the client goes: a client that obeys
	// acts on its own schedule.
	for {
		if _, err := c.Next(); err != nil {
			return
		}
	}
}

// Listen replaces whatever is at path with a listening socket.
func Listen(path string) (*net.UnixListener, error) {
	os.Remove(path)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}
