package gdbmi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/stem-edu/stem/internal/sockets"
)

// BridgeOptions configures RunBridge.
type BridgeOptions struct {
	// Dir is the container's socket directory: g.sock and gdb-sync.json
	// are created there.
	Dir string
	// Argv is the student's gdb command line, program first, for example
	// gdb-multiarch -q prog.elf -ex 'target remote 127.0.0.1:1234'.
	Argv []string
	// Stdin, Stdout and Stderr are the tmux pane. Pass *os.File values so
	// gdb gets the terminal itself (readline, Ctrl-C, job control).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is gdb's environment; nil inherits the bridge's.
	Env []string
	// Log receives the bridge's own diagnostics. Nil discards them: the
	// pane belongs to the student and gdb.
	Log io.Writer
	// KillDelay is how long gdb gets after SIGTERM (when ctx ends) before
	// it is killed. Default 5s.
	KillDelay time.Duration
	// MaxClients bounds concurrent g.sock connections. Default 16.
	MaxClients int
	// Quiet stops the bridge from noting in the pane where a client's
	// step, next, finish or until left the program. gdb prints breakpoint
	// hits and signals in the pane itself, but not the end of a step that
	// another UI started, so without the note the student would not see
	// the agent move the program.
	Quiet bool
}

const (
	maxClientLine      = 64 << 10 // one MI command from a client
	maxMILine          = 32 << 20 // one line of gdb output
	clientQueue        = 8192     // lines buffered per client before it is dropped as too slow
	clientWriteTimeout = 10 * time.Second
	gdbWriteTimeout    = 30 * time.Second
	sunPathMax         = 108 // kernel's sockaddr_un.sun_path, including NUL
)

var errLineTooLong = errors.New("line too long")

// RunBridge runs the student's gdb with a second, machine UI (`new-ui mi3`
// on a private pty) and serves that MI channel on Dir/g.sock to any number
// of clients, while gdb's console stays on Stdin/Stdout/Stderr. It mirrors
// the program state into Dir/gdb-sync.json, forwards SIGTERM and SIGHUP to
// gdb, ignores SIGINT and SIGQUIT (the terminal's Ctrl-C is gdb's), and
// returns gdb's exit code when gdb exits. Cancelling ctx terminates gdb.
//
// Protocol on g.sock: clients write MI command lines ("TOKEN-command
// args\n", token optional, only '-' commands); the bridge rewrites tokens so
// each result goes back to the client that asked, with its own token.
// Async records (*stopped, =thread-selected, ...) go to every client.
// Console and log stream records (~ &) and =cmd-param-changed produced
// while a client's command is being answered go to that client only,
// prefixed with its token (an extension of MI, which has no tokens on
// stream records), so output is attributed exactly; all other records go
// to every client without a token. "(gdb)" prompts are not forwarded.
// A breakpoint a client changes with a -break-* command is announced to the
// other clients as gdb announces the console's (=breakpoint-created,
// -modified, -deleted), and a frame a client selects as =thread-selected.
// The one command the bridge answers itself, "-stem-client NAME", names the
// connection for the notes the bridge writes in the pane.
//
// RunBridge installs process-wide signal handlers for its duration; run it
// as its own process (the hidden stem-mcp gdb-bridge subcommand).
func RunBridge(ctx context.Context, opt BridgeOptions) (exitCode int, err error) {
	if err := checkBridgeOptions(&opt); err != nil {
		return 2, err
	}
	sockPath := filepath.Join(opt.Dir, sockets.GDBSocket)
	if err := checkSocketPath(sockPath); err != nil {
		return 2, err
	}
	gdbPath, err := exec.LookPath(opt.Argv[0])
	if err != nil {
		return 127, fmt.Errorf("gdb bridge: %w", err)
	}

	master, slave, err := pty.Open()
	if err != nil {
		return 1, fmt.Errorf("gdb bridge: open pty for gdb's MI channel: %w", err)
	}
	defer master.Close()
	defer slave.Close()
	// No echo, no line editing, no signal characters: the channel carries
	// MI text both ways, byte for byte.
	if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
		return 1, fmt.Errorf("gdb bridge: set MI pty raw: %w", err)
	}

	// -iex commands run before the program is loaded and before any of the
	// student's -ex commands, so the MI UI sees everything from the start.
	// mi-async lets MI resume the program without blocking the channel; it
	// cannot be switched once a remote target is attached.
	argv := append([]string{"-iex", "set mi-async on", "-iex", "new-ui mi3 " + slave.Name()}, opt.Argv[1:]...)
	cmd := exec.Command(gdbPath, argv...)
	cmd.Args[0] = opt.Argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opt.Stdin, opt.Stdout, opt.Stderr
	cmd.Env = opt.Env
	// Bounds Wait when the stdio are not files and exec copies them.
	cmd.WaitDelay = 2 * time.Second

	// Catch (not ignore) the signals before gdb starts: caught signals are
	// reset to default in the child, ignored ones would be inherited.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("gdb bridge: start %s: %w", opt.Argv[0], err)
	}

	b := &bridge{
		opt:      opt,
		master:   master,
		pending:  map[string]pend{},
		clients:  map[*bclient]struct{}{},
		syncKick: make(chan struct{}, 1),
		state:    SyncState{State: StateNotStarted, GDBPid: cmd.Process.Pid, Updated: time.Now().UTC()},
	}
	b.writeSync()
	syncStop, syncDone := make(chan struct{}), make(chan struct{})
	go b.syncLoop(syncStop, syncDone)
	paneDone := make(chan struct{})
	b.paneNotes = make(chan string, 16)
	go func() {
		defer close(paneDone)
		for n := range b.paneNotes {
			if opt.Stdout != nil {
				io.WriteString(opt.Stdout, n)
			}
		}
	}()

	ready := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		b.readMI(ready)
	}()

	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

	var (
		ln        *net.UnixListener
		acceptWG  sync.WaitGroup
		readyC    = (<-chan struct{})(ready)
		readyWarn = time.After(30 * time.Second)
		ctxDone   = ctx.Done()
		killTimer <-chan time.Time
	)
loop:
	for {
		select {
		case <-readyC:
			readyC = nil
			ln, err = b.listen(sockPath)
			if err != nil {
				// gdb keeps running for the student; only the agent side
				// is missing, and Dial says so.
				b.logf("not serving %s: %v", sockPath, err)
				continue
			}
			acceptWG.Add(1)
			go func() {
				defer acceptWG.Done()
				b.accept(ln)
			}()
		case <-readyWarn:
			if readyC != nil {
				b.logf("gdb has not opened its MI channel after 30s (does it support new-ui?); not serving %s yet", sockPath)
			}
		case s := <-sigs:
			switch s {
			case syscall.SIGTERM, syscall.SIGHUP:
				_ = cmd.Process.Signal(s)
			case syscall.SIGINT:
				b.onInterrupt()
			}
		case <-ctxDone:
			ctxDone = nil
			_ = cmd.Process.Signal(syscall.SIGTERM)
			killTimer = time.After(opt.KillDelay)
		case <-killTimer:
			_ = cmd.Process.Kill()
		case <-exited:
			break loop
		}
	}

	if ln != nil {
		ln.Close()
		acceptWG.Wait()
		b.removeSocket(sockPath)
	}
	for _, c := range b.clientList() {
		c.close()
	}
	master.Close()
	slave.Close()
	<-readerDone
	b.bg.Wait()
	close(b.paneNotes)
	<-paneDone
	close(syncStop)
	<-syncDone
	b.mu.Lock()
	b.state.State = StateGDBExited
	b.state.GDBPid = 0
	b.state.Seq++
	b.state.Updated = time.Now().UTC()
	b.mu.Unlock()
	b.writeSync()

	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return code, fmt.Errorf("gdb bridge: wait for gdb: %w", waitErr)
	}
	return code, nil
}

func checkBridgeOptions(opt *BridgeOptions) error {
	if len(opt.Argv) == 0 || opt.Argv[0] == "" {
		return errors.New("gdb bridge: no gdb command given")
	}
	if !filepath.IsAbs(opt.Dir) {
		return fmt.Errorf("gdb bridge: socket directory %q is not absolute", opt.Dir)
	}
	fi, err := os.Lstat(opt.Dir)
	if err != nil {
		return fmt.Errorf("gdb bridge: socket directory: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
		return fmt.Errorf("gdb bridge: socket directory %s is not a directory (symlinks are refused)", opt.Dir)
	}
	if err := sockets.CheckLengths(opt.Dir); err != nil {
		return fmt.Errorf("gdb bridge: %w", err)
	}
	if opt.KillDelay <= 0 {
		opt.KillDelay = 5 * time.Second
	}
	if opt.MaxClients <= 0 {
		opt.MaxClients = 16
	}
	return nil
}

// checkSocketPath refuses to start when something other than a stale
// socket sits at path, or when a live bridge already answers there.
func checkSocketPath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gdb bridge: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("gdb bridge: refusing to replace %s: it is a %s, not a socket", path, fileKind(fi))
	}
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err == nil {
		c.Close()
		return fmt.Errorf("gdb bridge: another debugger bridge is already serving %s", path)
	}
	return nil
}

func fileKind(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

type pend struct {
	c        *bclient // nil for the bridge's own commands
	tok      string   // the client's token, restored on the result
	op       string   // the MI command name
	args     string   // the command's arguments, as sent
	onResult func(Record)
}

type bridge struct {
	opt    BridgeOptions
	master *os.File

	writeMu sync.Mutex // serializes writes to gdb's MI input

	mu            sync.Mutex
	nextTok       uint64
	pending       map[string]pend // bridge token -> who asked
	inflight      []string        // bridge tokens sent and not yet answered, oldest first
	clients       map[*bclient]struct{}
	state         SyncState
	runningFromMI bool   // the program was last resumed by an MI command, not the console
	resumedBy     string // who sent that command, for the pane's note
	resumeTok     string // the bridge token of the last command gdb answered ^running
	abortMsg      string // why gdb aborted that resume, for the pane's note
	sockFI        os.FileInfo

	syncKick  chan struct{}
	paneNotes chan string    // written to the pane by one goroutine, in order
	bg        sync.WaitGroup // the bridge's own commands, sent off the reader goroutine
}

func (b *bridge) logf(format string, args ...any) {
	if b.opt.Log == nil {
		return
	}
	fmt.Fprintf(b.opt.Log, "%s stem gdb-bridge: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// listen binds a temporary name, restricts it (0660, see below), then renames it
// over g.sock, so the socket is never reachable with looser permissions and
// a stale socket is replaced atomically (rename replaces a path without
// following it).
func (b *bridge) listen(path string) (*net.UnixListener, error) {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".g%x", os.Getpid()))
	if len(tmp) >= sunPathMax {
		return nil, fmt.Errorf("temporary socket path %s is too long", tmp)
	}
	if fi, err := os.Lstat(tmp); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("refusing to replace %s: it is a %s", tmp, fileKind(fi))
		}
		os.Remove(tmp)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", tmp, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	// 0660: the socket directory's ACL names the student, whose host
	// clients need write permission, and the group bits are its mask.
	if err := os.Chmod(tmp, 0o660); err != nil {
		return fail(fmt.Errorf("chmod %s: %w", tmp, err))
	}
	if err := checkSocketPath(path); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("rename %s to %s: %w", tmp, path, err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(fmt.Errorf("stat %s: %w", path, err))
	}
	b.sockFI = fi
	return ln, nil
}

// removeSocket removes g.sock only if it is still the socket we bound.
func (b *bridge) removeSocket(path string) {
	fi, err := os.Lstat(path)
	if err != nil || b.sockFI == nil || !os.SameFile(fi, b.sockFI) {
		return
	}
	if err := os.Remove(path); err != nil {
		b.logf("remove %s: %v", path, err)
	}
}
