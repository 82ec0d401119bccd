package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/cardaccess"
	"github.com/stem-edu/stem/internal/egress"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/termtext"
)

// boxRun is a started sandbox and the host services for it.
type boxRun struct {
	eng    engine.Engine
	id     string
	lg     *log.Logger
	cancel context.CancelFunc
	proxy  *egress.Proxy
	once   sync.Once
	// ownIDs: the sandbox has ids of its own (Container.IDMap), so what
	// its CLI made in its home with owner-only modes the student cannot
	// remove: the sandbox empties its home before it goes.
	ownIDs bool
}

// startBox serves the sandbox's sockets and creates and starts its
// container.
func startBox(ctx context.Context, spec runspec.Spec, eng EngineFunc, logw io.Writer, lg *log.Logger) (_ *boxRun, err error) {
	bs := spec.Sandbox
	if eng == nil {
		return nil, fmt.Errorf("sandboxed agent without a container engine")
	}
	var rules []egress.Rule
	for _, s := range bs.Egress {
		r, err := egress.ParseRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	e, err := eng(ctx)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &boxRun{eng: e, lg: lg, cancel: cancel, ownIDs: bs.Container.IDMap != nil}
	defer func() {
		if err != nil {
			b.remove()
		}
	}()
	listen := func(name string) (*net.UnixListener, error) {
		p := filepath.Join(bs.RunDir, name)
		os.Remove(p) // the directory is the host's own (0700), never the sandbox's
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			return nil, fmt.Errorf("sandbox socket: %w", err)
		}
		// Connecting takes write permission on the socket: the sandbox
		// user's (not root) must have it.
		if err := giveSocket(p, bs); err != nil {
			ln.Close()
			return nil, fmt.Errorf("sandbox socket: %w", err)
		}
		return ln, nil
	}
	eln, err := listen(sandbox.EgressSocket)
	if err != nil {
		return nil, err
	}
	b.proxy = egress.New(egress.Options{Rules: rules, Log: func(d egress.Decision) {
		verdict := "allowed"
		if !d.Allowed {
			verdict = "refused"
		}
		lg.Printf("egress %s %s %s %s", verdict, d.Method, d.Target, d.Err)
	}})
	go b.proxy.Serve(eln)
	mln, err := listen(sandbox.MCPSocket)
	if err != nil {
		return nil, err
	}
	go sandbox.ServeMCP(bctx, mln, bs.MCP, os.Environ(), logw)

	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	// A sandbox left by a supervisor that was killed has the same name.
	if old, err := e.Inspect(cctx, bs.Container.Name); err == nil && old.Labels[sandbox.Label] != "" {
		e.Remove(cctx, old.ID, true)
	}
	t0 := time.Now()
	id, err := e.Create(cctx, bs.Container)
	if err != nil {
		return nil, fmt.Errorf("create the agent's sandbox (image built? make agent-image): %w", err)
	}
	b.id = id
	t1 := time.Now()
	if err := e.Start(cctx, id); err != nil {
		return nil, fmt.Errorf("start the agent's sandbox: %w", err)
	}
	lg.Printf("sandbox %s (%.12s) created in %v, started in %v; egress allowed: %s", bs.Container.Name, id,
		t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond), strings.Join(bs.Egress, ", "))
	return b, nil
}

// giveSocket lets the sandbox user connect to the socket at path.
func giveSocket(path string, bs *runspec.BoxSpec) error {
	if bs.Container.IDMap == nil {
		return chownUser(path, bs.Container.User)
	}
	return cardaccess.Socket(path, uint32(bs.SocketUID))
}

// chownUser gives path to user ("uid:gid", as engine.Spec.User); nothing
// to do for an empty user or the caller's own ids.
func chownUser(path, user string) error {
	if user == "" {
		return nil
	}
	us, gs, ok := strings.Cut(user, ":")
	uid, uerr := strconv.Atoi(us)
	gid, gerr := strconv.Atoi(gs)
	if !ok || uerr != nil || gerr != nil {
		return fmt.Errorf("sandbox user %q is not uid:gid", user)
	}
	if uid == os.Getuid() && gid == os.Getgid() {
		return nil
	}
	return os.Lchown(path, uid, gid)
}

// boxTerm is the CLI's terminal in the sandbox, reached through the
// engine's exec stream.
type boxTerm struct {
	in    *io.PipeWriter
	sizes chan engine.TermSize
}

func (t *boxTerm) Write(p []byte) (int, error) { return t.in.Write(p) }
func (t *boxTerm) setSize(rows, cols int) {
	select {
	case t.sizes <- engine.TermSize{Rows: rows, Cols: cols}:
	default: // a burst of resizes: the last ones win soon enough
	}
}

// sandboxTerms are the terminal types the sandbox image knows (Debian's
// ncurses-base); others fall back to xterm-256color.
var sandboxTerms = map[string]bool{"xterm": true, "xterm-256color": true, "screen": true, "screen-256color": true,
	"tmux": true, "tmux-256color": true, "linux": true, "vt100": true, "vt220": true, "dumb": true}

// exec starts the CLI in the sandbox with a terminal.
func (b *boxRun) exec(ctx context.Context, spec runspec.Spec, term string, rows, cols int) (*agentProc, error) {
	bs := spec.Sandbox
	if !sandboxTerms[term] {
		term = "xterm-256color"
	}
	env := map[string]string{}
	for k, v := range bs.Env {
		env[k] = v
	}
	for _, k := range bs.KeyVars {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	env["TERM"] = term
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t := &boxTerm{in: inW, sizes: make(chan engine.TermSize, 16)}
	t.sizes <- engine.TermSize{Rows: rows, Cols: cols}
	exited := make(chan ptyproto.ExitMsg, 1)
	started := make(chan error, 1)
	var once sync.Once
	out := &firstRead{r: outR, first: func() { once.Do(func() { started <- nil }) }}
	xctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		code, err := b.eng.Exec(xctx, b.id, engine.ExecSpec{Cmd: spec.Argv, Env: env, WorkDir: spec.WorkDir,
			Tty: true, Stdin: inR, Stdout: outW, Resize: t.sizes})
		if err != nil {
			b.lg.Printf("exec in the sandbox: %v", err)
		}
		once.Do(func() {
			msg := fmt.Sprintf("exit status %d", code)
			if err != nil {
				msg = err.Error()
			}
			started <- fmt.Errorf("%s ended in the sandbox before it showed anything: %s", spec.Argv[0], msg)
		})
		outW.Close()
		ex := ptyproto.ExitMsg{Code: code}
		if code > 128 && code < 128+65 {
			ex.Signal = unix.SignalName(syscall.Signal(code - 128))
		}
		exited <- ex
	}()
	return &agentProc{
		termName: term, term: t, out: out, exited: exited, started: started,
		kill: func(s syscall.Signal) {
			// The CLI is a process of the container: stopping the
			// container ends it (SIGTERM, then SIGKILL after the timeout);
			// the last step removes the sandbox at once.
			go func() {
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				if s == syscall.SIGKILL {
					if b.ownIDs {
						// remove() empties its home first.
						b.eng.Stop(sctx, b.id, 0)
						return
					}
					b.eng.Remove(sctx, b.id, true)
					return
				}
				b.eng.Stop(sctx, b.id, 2*time.Second)
			}()
		},
		close: func() { cancel(); inW.Close() },
	}, nil
}

// firstRead calls first at the first bytes read.
type firstRead struct {
	r     io.Reader
	first func()
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 {
		f.first()
	}
	return n, err
}

// emptyHome removes what is in the sandbox's home, as the sandbox user
// (the sandbox is started again for it when the CLI's end stopped it).
func (b *boxRun) emptyHome(ctx context.Context) {
	if c, err := b.eng.Inspect(ctx, b.id); err != nil || !c.Running {
		if err == nil {
			err = b.eng.Start(ctx, b.id)
		}
		if err != nil {
			b.lg.Printf("empty the sandbox's home: %v", err)
			return
		}
	}
	var out bytes.Buffer
	code, err := b.eng.Exec(ctx, b.id, engine.ExecSpec{
		Cmd:    []string{"find", sandbox.Home, "-mindepth", "1", "-delete"},
		Stdout: &out, Stderr: &out,
	})
	if err != nil || code != 0 {
		b.lg.Printf("empty the sandbox's home: exit %d %v %s", code, err, termtext.Line(out.String(), 200))
	}
}

// remove ends the host services and removes the sandbox container.
func (b *boxRun) remove() {
	b.once.Do(func() {
		if b.id != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if b.ownIDs {
				b.emptyHome(ctx)
			}
			if err := b.eng.Remove(ctx, b.id, true); err != nil {
				b.lg.Printf("remove the sandbox %.12s: %v", b.id, err)
			}
			cancel()
		}
		if b.proxy != nil {
			b.proxy.Close()
		}
		b.cancel()
	})
}
