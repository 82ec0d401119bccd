// Package factory builds the production cmdutil.Factory for stemctl: real
// directories, the registry, the workspace and the Podman engine.
package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// New returns a Factory over the process environment.
func New() *cmdutil.Factory {
	f := &cmdutil.Factory{
		IOStreams: iostreams.System(),
		Getenv:    os.Getenv,
	}
	dirs := sync.OnceValues(func() (xdg.Dirs, error) { return xdg.Resolve(f.Getenv) })
	f.Dirs = dirs
	f.Registry = sync.OnceValues(func() (*registry.Registry, error) {
		d, err := dirs()
		if err != nil {
			return nil, err
		}
		return registry.Open(d.State)
	})
	f.Workspace = func() (*workspace.Workspace, error) {
		d, err := dirs()
		if err != nil {
			return nil, err
		}
		return workspace.Open(workspace.DefaultRoot(f.Getenv, d.Home))
	}
	f.Self = func() (string, error) {
		p, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the stemctl executable: %w", err)
		}
		return filepath.EvalSymlinks(p)
	}
	f.MCPBinary = func() (string, error) { return FindMCP(f.Getenv, f.Self) }
	eng := onceCtx(func(ctx context.Context) (engine.Engine, error) { return newEngine(ctx, f) })
	f.Engine = eng
	f.Layout = func() (sockets.Layout, error) {
		d, err := dirs()
		if err != nil {
			return sockets.Layout{}, err
		}
		return sockets.Layout{Runtime: d.Runtime}, nil
	}
	f.Audit = func() (*audit.Log, error) {
		d, err := dirs()
		if err != nil {
			return nil, err
		}
		return audit.Open(d.State)
	}
	// core is what both the manager and the checker stand on.
	core := func(ctx context.Context) (engine.Engine, *registry.Registry, sockets.Layout, error) {
		e, err := eng(ctx)
		if err != nil {
			return nil, nil, sockets.Layout{}, err
		}
		reg, err := f.Registry()
		if err != nil {
			return nil, nil, sockets.Layout{}, err
		}
		l, err := f.Layout()
		return e, reg, l, err
	}
	f.Manager = func(ctx context.Context) (*instance.Manager, error) {
		e, reg, l, err := core(ctx)
		if err != nil {
			return nil, err
		}
		// Only creating a container needs stem-mcp (it is mounted in);
		// list, status, down, rm, attach and exec work without it.
		mcp, mcpErr := f.MCPBinary()
		var wsRoot string
		if ws, err := f.Workspace(); err == nil {
			wsRoot = ws.Root
		}
		return &instance.Manager{
			Engine: e, Registry: reg, Layout: l, MCPBinary: mcp, MCPBinaryErr: mcpErr, Workspace: wsRoot,
			Servers: servers(e), NvimModified: probe.NvimModified, NvimQuit: probe.NvimQuit,
			Progress: f.IOStreams.ErrOut, IDMap: idmap.ForCaller,
		}, nil
	}
	f.Checker = func(ctx context.Context) (*verify.Checker, error) {
		e, reg, l, err := core(ctx)
		if err != nil {
			return nil, err
		}
		return &verify.Checker{Layout: l, Registry: reg, Inspector: e, Servers: servers(e)}, nil
	}
	return f
}

// servers is the health check of an instance's servers, the same for every
// command: a container's tmux of another protocol version is asked from
// inside the container.
func servers(e engine.Engine) verify.Servers {
	return verify.Servers{Tmux: probe.Tmux, Nvim: probe.Nvim, TmuxInside: instance.TmuxInside(e)}
}

// onceCtx memoizes a constructor that needs a context; a failed attempt is
// not cached, so a later call may succeed (e.g. after the service started).
func onceCtx[T any](fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	var mu sync.Mutex
	var val T
	var ok bool
	return func(ctx context.Context) (T, error) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			return val, nil
		}
		v, err := fn(ctx)
		if err != nil {
			return v, err
		}
		val, ok = v, true
		return val, nil
	}
}

// FindMCP locates stem-mcp: $STEM_MCP_BIN, next to stemctl, then $PATH.
func FindMCP(getenv func(string) string, self func() (string, error)) (string, error) {
	if p := getenv("STEM_MCP_BIN"); p != "" {
		return checkExec(p)
	}
	if s, err := self(); err == nil {
		if p, err := checkExec(filepath.Join(filepath.Dir(s), "stem-mcp")); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("stem-mcp"); err == nil {
		return checkExec(p)
	}
	return "", errors.New("stem-mcp not found next to stemctl or in PATH: build it with `make build` or set STEM_MCP_BIN")
}

func checkExec(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("stem-mcp at %s: %w", p, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("stem-mcp at %s: %w", abs, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("stem-mcp at %s is not an executable file", abs)
	}
	return abs, nil
}
