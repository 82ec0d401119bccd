// Package nvimtest starts a real Neovim for tests: `nvim --headless --clean`
// with stem's sysinit.vim, listening on a short socket path in a private
// temporary directory, working in its own temporary directory, and stopped
// by t.Cleanup.
//
// By default a do-nothing UI is attached over a second RPC connection, so
// Neovim behaves as it does in the student's terminal (Press ENTER and
// -- More -- prompts only exist when a UI is attached).
package nvimtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/testenv/leftover"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// MaxSocketPath keeps AF_UNIX paths well inside the kernel's 108 bytes.
const MaxSocketPath = 100

// callTimeout bounds every helper call to Neovim, so a test that leaves it
// at a prompt fails instead of hanging.
const callTimeout = 5 * time.Second

// Options configure Start. The zero value is the usual setup.
type Options struct {
	// NoSysinit starts without containers/files/nvim/sysinit.vim.
	NoSysinit bool
	// NoUI leaves Neovim without a UI (then it never shows prompts).
	NoUI bool
	// Terminal runs Neovim with its real terminal UI on a pseudo-terminal
	// (whose output is discarded) instead of headless with an RPC UI. Some
	// prompts (-- More --) only appear with the terminal UI.
	Terminal bool
	// Cmd are Ex commands run with --cmd before sysinit.vim, e.g. "set
	// modeline" to get a non-root user's default when tests run as root.
	Cmd []string
	// Args are appended to the command line (e.g. files to edit).
	Args []string
	// Dir is the working directory; default a new t.TempDir().
	Dir string
	// Env is added to the environment.
	Env []string
	// Plugin puts stem's editor plugin (PluginDir) first on the
	// runtimepath, as the images install it. Its startup (debug view, the
	// task's files) stays off: that runs only on $STEM_SOCKDIR/n.sock.
	Plugin bool
	// Session makes it the session's editor, as stem-init starts it:
	// $STEM_SOCKDIR is its socket's directory, so plugin/stem.lua (with
	// Plugin) runs the plugin's startup.
	Session bool
}

// Nvim is a running Neovim under test.
type Nvim struct {
	// Socket is the RPC socket (n.sock) path.
	Socket string
	// Dir is Neovim's working directory.
	Dir string
	// Home holds the XDG config/data/state/cache directories (swap files
	// live under Home/state).
	Home string

	opts Options
	bin  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *bytes.Buffer
	api    *gonvim.Nvim
	ui     *gonvim.Nvim
}

// Binary returns the nvim executable, skipping the test under -short and
// failing it with the package to install when there is none (Neovim 0.7.2
// on Debian 12, as in the task containers).
func Binary(t testing.TB) string {
	t.Helper()
	return needs.Program(t, "nvim", "neovim")
}

// SysinitPath is containers/files/nvim/sysinit.vim in this checkout.
func SysinitPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "containers", "files", "nvim", "sysinit.vim")
}

// PluginDir is containers/files/nvim in this checkout: the editor
// plugin's runtime directory (plugin/stem.lua, lua/stem/*.lua), which the
// images install in /etc/xdg/nvim. Put it on the runtimepath with
// Options.Plugin.
func PluginDir() string { return filepath.Dir(SysinitPath()) }

// socketDir makes a private directory whose n.sock path stays short even
// when TMPDIR is long.
func socketDir(t testing.TB) string {
	t.Helper()
	for _, base := range []string{os.TempDir(), "/tmp"} {
		d, err := os.MkdirTemp(base, "nvt")
		if err != nil {
			continue
		}
		if len(filepath.Join(d, "n.sock")) < MaxSocketPath {
			return d
		}
		os.RemoveAll(d)
	}
	t.Fatalf("no temporary directory gives a socket path under %d bytes", MaxSocketPath)
	return ""
}

// Start starts Neovim and waits until it answers on its socket.
func Start(t testing.TB, opts Options) *Nvim {
	t.Helper()
	n := &Nvim{opts: opts, bin: Binary(t), Dir: opts.Dir}
	leftover.Sweep()
	if n.Dir == "" {
		n.Dir = t.TempDir()
	}
	n.Home = t.TempDir()
	sd := socketDir(t)
	n.Socket = filepath.Join(sd, "n.sock")
	t.Cleanup(func() {
		n.stop()
		os.RemoveAll(sd)
	})
	n.start(t)
	return n
}

func (n *Nvim) args() []string {
	a := []string{"--clean", "--listen", n.Socket}
	if !n.opts.Terminal {
		a = append([]string{"--headless"}, a...)
	}
	if n.opts.Plugin {
		a = append(a, "--cmd", "set rtp^="+strings.NewReplacer(",", `\,`, " ", `\ `).Replace(PluginDir()))
	}
	for _, c := range n.opts.Cmd {
		a = append(a, "--cmd", c)
	}
	if !n.opts.NoSysinit {
		a = append(a, "-u", SysinitPath())
	}
	return append(a, n.opts.Args...)
}

func (n *Nvim) start(t testing.TB) {
	t.Helper()
	if !n.opts.NoSysinit {
		if _, err := os.Stat(SysinitPath()); err != nil {
			t.Fatalf("sysinit.vim: %v", err)
		}
	}
	env := append([]string{
		"XDG_CONFIG_HOME=" + filepath.Join(n.Home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(n.Home, "data"),
		"XDG_STATE_HOME=" + filepath.Join(n.Home, "state"),
		"XDG_CACHE_HOME=" + filepath.Join(n.Home, "cache"),
		leftover.Env(), // a later run removes it if this one times out
	}, n.opts.Env...)
	if n.opts.Session {
		env = append(env, "STEM_SOCKDIR="+filepath.Dir(n.Socket))
	}
	cmd := exec.Command(n.bin, n.args()...)
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	if n.opts.Terminal {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
		// pty.Start makes the child a session leader on the terminal.
		ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
		if err != nil {
			t.Fatalf("start nvim on a pty: %v", err)
		}
		// Drain the screen output, or Neovim blocks once the pty is full.
		go func() { io.Copy(io.Discard, ptmx); ptmx.Close() }()
	} else {
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start nvim: %v", err)
		}
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.stderr = cmd, exited, &stderr
	n.mu.Unlock()

	api, err := n.dialWhenReady(exited)
	if err != nil {
		t.Fatalf("nvim on %s: %v (stderr: %s)", n.Socket, err, stderr.String())
	}
	n.mu.Lock()
	n.api = api
	n.mu.Unlock()
	// Neovim 0.7 silently listens on a random address if the socket path is
	// taken; make sure we reached the process we started.
	var name string
	n.call(t, func(v *gonvim.Nvim) error { return v.VVar("servername", &name) })
	if name != n.Socket {
		t.Fatalf("nvim listens on %q, want %q", name, n.Socket)
	}
	if !n.opts.NoUI && !n.opts.Terminal {
		ui, err := gonvim.Dial(n.Socket, gonvim.DialLogf(func(string, ...any) {}))
		if err != nil {
			t.Fatalf("dial nvim for UI: %v", err)
		}
		n.mu.Lock()
		n.ui = ui
		n.mu.Unlock()
		n.call(t, func(*gonvim.Nvim) error { return ui.AttachUI(100, 30, map[string]any{"ext_linegrid": true}) })
	}
}

func (n *Nvim) dialWhenReady(exited chan struct{}) (*gonvim.Nvim, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return nil, errors.New("nvim exited during start-up")
		default:
		}
		if _, err := os.Stat(n.Socket); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			v, err := gonvim.Dial(n.Socket, gonvim.DialContext(ctx), gonvim.DialLogf(func(string, ...any) {}))
			cancel()
			if err == nil {
				return v, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.New("socket did not appear within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills Neovim and closes the helper's connections.
func (n *Nvim) stop() {
	n.mu.Lock()
	cmd, exited, api, ui := n.cmd, n.exited, n.api, n.ui
	n.cmd, n.api, n.ui = nil, nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nvim and anything it spawned (:terminal)
	<-exited
	for _, v := range []*gonvim.Nvim{api, ui} {
		if v != nil {
			go v.Close() // the peer is gone; Close only reaps the reader
		}
	}
}

// Kill ends Neovim with SIGKILL, as a crash would: the socket file stays.
func (n *Nvim) Kill(t testing.TB) {
	t.Helper()
	n.stop()
}

// Restart kills Neovim if it runs, removes the stale socket (as the
// container's launcher must: Neovim 0.7 would otherwise listen elsewhere)
// and starts a new Neovim on the same socket path.
func (n *Nvim) Restart(t testing.TB) {
	t.Helper()
	n.stop()
	if err := os.Remove(n.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remove stale socket: %v", err)
	}
	n.start(t)
}

// PID is the running Neovim's process id.
func (n *Nvim) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Stderr is what Neovim wrote to stderr so far.
func (n *Nvim) Stderr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stderr == nil {
		return ""
	}
	return n.stderr.String()
}

// API is the helper's own connection: the "student side" for setting up
// and checking state. Prefer Exec, Lua and Input, which have timeouts.
func (n *Nvim) API() *gonvim.Nvim {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.api
}

// call runs fn on the helper connection with a timeout.
func (n *Nvim) call(t testing.TB, fn func(*gonvim.Nvim) error) {
	t.Helper()
	v := n.API()
	if v == nil {
		t.Fatal("nvimtest: nvim is not running")
	}
	done := make(chan error, 1)
	go func() { done <- fn(v) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("nvimtest: %v", err)
		}
	case <-time.After(callTimeout):
		t.Fatalf("nvimtest: no answer from nvim within %v (is it waiting at a prompt?)", callTimeout)
	}
}

// Exec runs Vimscript (test setup only) and returns its output.
func (n *Nvim) Exec(t testing.TB, src string) string {
	t.Helper()
	var out string
	n.call(t, func(v *gonvim.Nvim) (err error) { out, err = v.Exec(src, true); return err })
	return out
}

// Lua runs a Lua chunk (test setup only) and decodes its result into
// result (which may be nil).
func (n *Nvim) Lua(t testing.TB, result any, code string, args ...any) {
	t.Helper()
	n.call(t, func(v *gonvim.Nvim) error { return v.ExecLua(code, result, args...) })
}

// Input queues keys as if the student typed them (nvim_input; <CR>-style
// notation) and returns at once.
func (n *Nvim) Input(t testing.TB, keys string) {
	t.Helper()
	n.call(t, func(v *gonvim.Nvim) error { _, err := v.Input(keys); return err })
}

// Mode returns nvim_get_mode().
func (n *Nvim) Mode(t testing.TB) (string, bool) {
	t.Helper()
	var m *gonvim.Mode
	n.call(t, func(v *gonvim.Nvim) (err error) { m, err = v.Mode(); return err })
	return m.Mode, m.Blocking
}

// WaitMode waits until ok(mode, blocking) holds, failing after 5 s.
func (n *Nvim) WaitMode(t testing.TB, ok func(mode string, blocking bool) bool) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for {
		m, b := n.Mode(t)
		if ok(m, b) {
			return m, b
		}
		if time.Now().After(deadline) {
			t.Fatalf("nvimtest: mode stayed %q (blocking %v)", m, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// String describes the instance for failure messages.
func (n *Nvim) String() string {
	return fmt.Sprintf("nvim pid %d on %s", n.PID(), n.Socket)
}
