package tmux

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/tmux/imsg"
)

// A tmux client obeys its server: MSG_SHELL makes a command client exec
// a program, MSG_EXEC makes an attached client exec one when it exits,
// MSG_LOCK runs system(), MSG_SUSPEND stops it, and MSG_READ_OPEN and
// MSG_WRITE_OPEN open paths on the client's side. The server behind an
// instance's t.sock is the container's, so stem never runs the host's
// tmux binary as its client: wireClient speaks the client side of the
// protocol itself and does none of those things. It identifies itself
// (with no environment: the host's variables are not the container's
// business), sends one command, and from then on only listens for the
// end of the conversation.

// errRefused is why a connection was ended because the server asked the
// client to do something only a hostile server asks of a control client.
var errRefused = errors.New("the server asked its client to run a program or open a file on this host; refused and disconnected (something in the container replaced the student's tmux server: `stemctl up` re-creates the instance)")

// refusedName names the requests a client refuses.
var refusedName = map[uint32]string{
	imsg.MsgShell: "MSG_SHELL", imsg.MsgExec: "MSG_EXEC", imsg.MsgLock: "MSG_LOCK",
	imsg.MsgSuspend: "MSG_SUSPEND", imsg.MsgReadOpen: "MSG_READ_OPEN", imsg.MsgWriteOpen: "MSG_WRITE_OPEN",
}

// wireOptions is what one wire client says to the server.
type wireOptions struct {
	flags uint64
	argv  []string
	// name is the client's tty name, which tmux also uses as the client's
	// name (the default, "client-PID", is the same for every client in
	// one process).
	name string
	// stdin and stdout, when set, are handed to the server: a control
	// client's server reads commands from stdin and writes the control
	// stream to stdout itself.
	stdin, stdout *os.File
}

// wireClient is one client connection spoken in Go.
type wireClient struct {
	ic   *imsg.Conn
	done chan struct{}

	mu      sync.Mutex
	exited  bool   // MSG_EXIT seen
	retval  int    // its value
	message string // its text, or why the conversation ended
	err     error  // protocol or refusal error
}

// dialWire connects to socket without following a symlink (package
// unixpin), identifies, sends the command and starts listening.
func dialWire(ctx context.Context, socket string, o wireOptions) (*wireClient, error) {
	nc, err := unixpin.Dial(ctx, socket)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: %w: %w", ErrClosed, ErrNoServer, err)
		case errors.Is(err, unix.ECONNREFUSED):
			return nil, fmt.Errorf("%w: %w: no server running on %s", ErrClosed, ErrNoServer, socket)
		}
		return nil, fmt.Errorf("tmux: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("tmux: %s: not a unix connection", socket)
	}
	w := &wireClient{ic: imsg.NewConn(uc), done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		w.ic.SetWriteDeadline(dl)
	}
	if err := w.identify(o); err != nil {
		uc.Close()
		return nil, fmt.Errorf("tmux: identifying to %s: %w", socket, err)
	}
	w.ic.SetWriteDeadline(time.Time{})
	go w.listen()
	return w, nil
}

// identifyBatchTimeout bounds the one write that identifies the client; it
// does not follow the dial's context (see identify).
const identifyBatchTimeout = 5 * time.Second

// identify hands the server the client's descriptors, then everything else
// in one write. tmux 3.3a marks a client as a control client when it reads
// MSG_IDENTIFY_FLAGS and sets up its control state only at
// MSG_IDENTIFY_DONE; a client that goes away in between crashes the server
// (a NULL dereference in control_stop), taking the student's session with
// it. So the flags and MSG_IDENTIFY_DONE arrive together or not at all:
// they go in one write, and that write is not cut short by the dial's
// deadline (a cancelled dial closes the connection after it).
func (w *wireClient) identify(o wireOptions) error {
	fds, rest := identifyMessages(o)
	if err := w.sendDescriptors(fds); err != nil {
		return err
	}
	w.ic.SetWriteDeadline(time.Now().Add(identifyBatchTimeout))
	return w.ic.SendAll(rest)
}

// sendDescriptors sends each message carrying a descriptor in a write of
// its own (one descriptor per message, as tmux reads them).
func (w *wireClient) sendDescriptors(fds []message) error {
	for _, m := range fds {
		if err := w.ic.Send(m.typ, m.f, m.data); err != nil {
			return err
		}
	}
	return nil
}

// message is one message to send with a descriptor.
type message struct {
	typ  uint32
	f    *os.File
	data []byte
}

// identifyMessages is what identify sends: the messages carrying a
// descriptor (each a write of its own), then the rest, ending with
// MSG_IDENTIFY_DONE and the command.
func identifyMessages(o wireOptions) (fds []message, rest []imsg.Out) {
	flags := o.flags | imsg.ClientUTF8
	u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	if o.stdin != nil {
		fds = append(fds, message{imsg.MsgIdentifyStdin, o.stdin, nil})
	}
	if o.stdout != nil {
		fds = append(fds, message{imsg.MsgIdentifyStdout, o.stdout, nil})
	}
	rest = []imsg.Out{
		{Type: imsg.MsgIdentifyFlags, Data: u32(uint32(flags))},
		{Type: imsg.MsgIdentifyLongFlags, Data: binary.NativeEndian.AppendUint64(nil, flags)},
		{Type: imsg.MsgIdentifyTerm, Data: imsg.CString("screen")},
		{Type: imsg.MsgIdentifyFeatures, Data: u32(0)},
		// tmux dereferences the tty name unconditionally: always send one.
		{Type: imsg.MsgIdentifyTTYName, Data: imsg.CString(o.name)},
		{Type: imsg.MsgIdentifyCWD, Data: imsg.CString("/")},
		{Type: imsg.MsgIdentifyClientPID, Data: u32(uint32(os.Getpid()))},
		{Type: imsg.MsgIdentifyDone},
		{Type: imsg.MsgCommand, Data: imsg.PackArgv(o.argv)},
	}
	return fds, rest
}

// listen reads the server's messages until the conversation ends.
func (w *wireClient) listen() {
	defer close(w.done)
	defer w.ic.Close()
	for {
		m, err := w.ic.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				w.fail(err)
			}
			return
		}
		if end := w.handle(m); end {
			return
		}
	}
}

// handle acts on one message and reports whether the conversation is over.
func (w *wireClient) handle(m imsg.Msg) bool {
	switch m.Type {
	case imsg.MsgVersion:
		w.fail(fmt.Errorf("%w: protocol version mismatch (client %d, server %d)", ErrVersionMismatch, imsg.ProtocolVersion, m.PeerID&0xff))
		return true
	case imsg.MsgExit:
		w.mu.Lock()
		w.exited = true
		if len(m.Data) >= 4 {
			w.retval = int(int32(binary.NativeEndian.Uint32(m.Data)))
			w.message = cText(m.Data[4:])
		}
		w.mu.Unlock()
		return true
	case imsg.MsgShutdown:
		w.setMessage("server exited")
		return true
	case imsg.MsgExited:
		return true
	case imsg.MsgDetach, imsg.MsgDetachKill:
		w.setMessage("detached")
		w.ic.Send(imsg.MsgExiting, nil, nil)
	case imsg.MsgShell, imsg.MsgExec, imsg.MsgLock, imsg.MsgSuspend, imsg.MsgReadOpen, imsg.MsgWriteOpen:
		// stem never sends a command that reads or writes a file through
		// its client, so a server that asks for one is not a real tmux
		// serving us.
		w.fail(fmt.Errorf("%w: %s: %w", ErrProtocol, refusedName[m.Type], errRefused))
		return true
	}
	// MSG_READY, MSG_FLAGS, MSG_WRITE and the rest change nothing here.
	return false
}

// cText is a NUL-terminated message text made safe to show: bounded and
// without terminal controls (it comes from the container).
func cText(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\x00")
	out, _ := termtext.Sanitize([]byte(s), termtext.Options{MaxBytes: 200})
	return strings.Join(strings.Fields(out), " ")
}

func (w *wireClient) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *wireClient) setMessage(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.message == "" {
		w.message = s
	}
}

// kill ends the connection at once; the server then drops the client and
// closes the descriptors it was given.
func (w *wireClient) kill() { w.ic.Close() }

// wait waits for the conversation to end and returns its error, if any.
func (w *wireClient) wait() error {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// result is MSG_EXIT's value and text after wait; ok is false when the
// server never sent one.
func (w *wireClient) result() (retval int, message string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retval, w.message, w.exited
}

// Ping asks the tmux server on socket whether it has a session, with a
// one-shot client spoken in Go (has-session, no output read). It needs
// no tmux on this host and obeys nothing the server asks. Errors wrap
// ErrNoServer, ErrNoSession, ErrVersionMismatch or ErrProtocol, and do
// not name the socket (the caller does).
func Ping(ctx context.Context, socket string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	w, err := dialWire(ctx, socket, wireOptions{flags: imsg.ClientNoStartServer, argv: []string{"has-session"}})
	if err != nil {
		return err
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		w.kill()
		<-w.done
		return fmt.Errorf("tmux: no answer: %w", ctx.Err())
	}
	if err := w.wait(); err != nil {
		return err
	}
	retval, msg, ok := w.result()
	switch {
	case !ok:
		return fmt.Errorf("%w: %w: the server closed the connection without an answer", ErrClosed, ErrNoServer)
	case retval != 0:
		if msg == "" {
			msg = "no session"
		}
		return fmt.Errorf("%w: %s", ErrNoSession, msg)
	}
	return nil
}
