package mcpserver

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/verify"
)

// conn holds the live connections to one verified instance.
type conn struct {
	// cur is the instance as last verified; tools read it while another
	// call's verification may replace it (same container, same sockets).
	cur  atomic.Pointer[verify.Target]
	logf func(string, ...any)
	tmux TmuxClient
	nvim NvimClient
	gdbl gdbLink
	// dialGDB reaches the debugger's bridge (gdbl holds the live client).
	dialGDB func(ctx context.Context) (GDBClient, error)
	// leave ends this server's entry among the session's participants.
	leave func()

	mu     sync.Mutex
	closed bool
}

// target is the instance as last verified.
func (c *conn) target() *verify.Target { return c.cur.Load() }

func (c *conn) setTarget(t verify.Target) { c.cur.Store(&t) }

// programs names the programs dial may start; the zero value means
// "podman" from PATH (tests put a stand-in there). On the host no tmux
// program is ever run: the client is tmux's protocol spoken in Go, which
// obeys nothing the container's server asks (see package tmux).
type programs struct {
	podman string
	// connect, when set, reaches the parts instead of the real servers
	// (Options.Connect: in-process tests).
	connect Connector
}

// containerTmux runs the container's own tmux client, which speaks its
// server's protocol whatever the host has.
func (p programs) containerTmux(t verify.Target) []string {
	return []string{cmp.Or(p.podman, "podman"), "exec", "-i", t.Record.ContainerID, "tmux"}
}

// dial connects to the instance's tmux, which every session needs (the
// editor runs in it). Neovim is connected at its first use and again after
// it restarts: a Neovim that is gone, broken or hostile fails only the
// tools that use it (see parts.go).
func dial(ctx context.Context, t verify.Target, logf func(string, ...any), progs programs) (*conn, error) {
	connect := progs.connect
	if connect == nil {
		connect = progs.realParts
	}
	p, err := connect(ctx, t, logf)
	if err != nil {
		return nil, err
	}
	c := &conn{tmux: p.Tmux, nvim: p.Nvim, dialGDB: p.GDB, logf: logf}
	c.setTarget(t)
	return c, nil
}

// realParts connects to the instance's own servers on its sockets.
func (progs programs) realParts(ctx context.Context, t verify.Target, logf func(string, ...any)) (Parts, error) {
	tm, err := tmux.DialOrInside(ctx, tmux.Options{Socket: t.Dir.Tmux(), Session: "stem"}, progs.containerTmux(t), logf)
	if err != nil {
		logf("instance %s: tmux does not answer: %v", t.Record.Instance, err)
		return Parts{}, tmuxDown(t.Record, err)
	}
	nv := nvim.New(t.Dir.Nvim(), nvim.Options{
		CallTimeout: 5 * time.Second,
		OnReconnect: func(r nvim.Reconnect) { logf("nvim reconnected (%s)", r.Reason) },
	})
	sock := t.Dir.GDB() // the directory stays while the connection lives
	return Parts{Tmux: tm, Nvim: nv, GDB: func(ctx context.Context) (GDBClient, error) {
		cl, err := gdbmi.Dial(ctx, sock)
		if err != nil {
			return nil, err // no typed nil in the interface
		}
		return cl, nil
	}}, nil
}

// alive reports whether the connections can still be trusted without a
// full re-verification.
func (c *conn) alive() bool {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return false
	}
	select {
	case <-c.tmux.Done():
		return false
	default:
		return true
	}
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.leave != nil {
		c.leave()
	}
	c.tmux.Close()
	c.nvim.Close()
	c.closeGDB()
}
