package tmux

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/tmux/imsg"
)

// peer is the other end of the control stream's pipes: a tmux client
// process inside the container, or the Go client's socket.
type peer interface {
	// kill ends the client at once.
	kill()
	// wait returns once the client has ended, after the control stream
	// did; its error says why, when the client knows.
	wait() error
	// diag is what the client said about its end (a process's stderr).
	diag() string
}

// procPeer is a tmux client program (see Options.Command).
type procPeer struct {
	cmd    *exec.Cmd
	stderr *limitedBuffer
}

func (p procPeer) kill()        { p.cmd.Process.Kill() }
func (p procPeer) wait() error  { return p.cmd.Wait() }
func (p procPeer) diag() string { return p.stderr.String() }

// wirePeer is the Go client.
type wirePeer struct {
	w    *wireClient
	name string  // the client's name in tmux
	hold *holder // keeps the pipes' ends should this process die (holder.go)
}

func (p wirePeer) kill() { p.w.kill() }

// wait: the control stream has ended, so the server has dropped us or
// is about to; a server that keeps the socket open without a word is
// not waited for long. The connection is closed by then, so the holder
// can let the pipes go.
func (p wirePeer) wait() error {
	select {
	case <-p.w.done:
	case <-time.After(2 * time.Second):
		p.w.kill()
	}
	err := p.w.wait()
	p.hold.release()
	return err
}

func (p wirePeer) diag() string {
	_, msg, _ := p.w.result()
	return msg
}

func start(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Command) == 0 {
		return startWire(ctx, opts)
	}
	return startProcess(opts)
}

// controlPipes makes the control client's stdin and stdout: the client's
// ends (inR, outW) and ours (inW, outR).
func controlPipes() (inR, inW, outR, outW *os.File, err error) {
	if inR, inW, err = os.Pipe(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("tmux: stdin pipe: %w", err)
	}
	if outR, outW, err = os.Pipe(); err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, nil, fmt.Errorf("tmux: stdout pipe: %w", err)
	}
	return inR, inW, outR, outW, nil
}

// startWire attaches the Go client: the server gets our pipes as the
// client's stdin and stdout and speaks the control protocol on them.
func startWire(ctx context.Context, opts Options) (*Client, error) {
	inR, inW, outR, outW, err := controlPipes()
	if err != nil {
		return nil, err
	}
	// The holder has the pipes before the server does: there is no moment
	// at which this process's death would end them before the connection.
	hold, err := startHolder(inW, outR)
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	name := "stem-" + newNonce()[5:17]
	w, err := dialWire(ctx, opts.Socket, controlOptions(name, opts.Session, inR, outW))
	inR.Close()
	outW.Close()
	if err != nil {
		hold.release()
		inW.Close()
		outR.Close()
		return nil, err
	}
	c := newClient(opts, wirePeer{w: w, name: name, hold: hold}, inW)
	go c.read(outR)
	return c, nil
}

// controlOptions identify a control client attaching to session.
func controlOptions(name, session string, stdin, stdout *os.File) wireOptions {
	return wireOptions{
		name:   name,
		flags:  imsg.ClientControl | imsg.ClientNoStartServer,
		argv:   []string{"attach-session", "-t", "=" + session, "-f", "ignore-size"},
		stdin:  stdin,
		stdout: stdout,
	}
}

func newClient(opts Options, p peer, stdin *os.File) *Client {
	return &Client{
		opts:     opts,
		peer:     p,
		stdin:    stdin,
		subs:     make(map[*Subscription]struct{}),
		taps:     make(map[uint64]tap),
		paneMu:   make(map[PaneID]*sync.Mutex),
		done:     make(chan struct{}),
		closing:  make(chan struct{}),
		attached: make(chan struct{}),
	}
}

// startProcess runs a tmux client program (Options.Command).
func startProcess(opts Options) (*Client, error) {
	socket := opts.Socket
	var pinned *unixpin.Socket
	if !opts.SocketInContainer {
		// The socket directory is writable from the container: the client
		// gets the socket opened without following a symlink, so nothing
		// renamed over t.sock can send it to another server on the host.
		var err error
		if pinned, err = unixpin.Open(opts.Socket); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Not fs.ErrNotExist: that would read as "no tmux binary".
				return nil, fmt.Errorf("%w: %w: %s does not exist", ErrClosed, ErrNoServer, opts.Socket)
			}
			return nil, fmt.Errorf("tmux: %w", err)
		}
		defer pinned.Close()
		socket = unixpin.ChildPath
	}
	argv := append(append([]string{}, opts.Command[1:]...),
		"-u", "-N", "-S", socket, "-C", "attach-session", "-t", "="+opts.Session, "-f", "ignore-size")
	cmd := exec.Command(opts.Command[0], argv...)
	if pinned != nil {
		cmd.ExtraFiles = []*os.File{pinned.File()}
	}
	cmd.Env = clientEnv()
	// Own process group: a signal to our group (Ctrl-C in stemctl) does
	// not kill the client behind our back, and Close can end it cleanly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	inR, inW, outR, outW, err := controlPipes()
	if err != nil {
		return nil, err
	}
	stderr := &limitedBuffer{max: 4096}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tmux: %s not found (install the Debian package tmux): %w", opts.Command[0], err)
		}
		return nil, fmt.Errorf("tmux: starting %s: %w", opts.Command[0], err)
	}
	inR.Close()
	outW.Close()

	c := newClient(opts, procPeer{cmd: cmd, stderr: stderr}, inW)
	go c.read(outR)
	return c, nil
}
