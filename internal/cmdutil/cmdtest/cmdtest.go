// Package cmdtest runs stemctl commands in-process against a fake engine:
// a private account (directories, a copy of the example workspace, a
// registry) whose Factory builds a real instance.Manager over
// enginetest.Fake, so a command's flags, output and errors are tested in
// milliseconds without Podman. What needs a real container (attach, exec,
// the editor) is tested through the built binary in internal/cmd/e2e.
package cmdtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/enginetest"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// World is one test's account.
type World struct {
	F       *cmdutil.Factory
	Engine  *enginetest.Fake
	Dirs    xdg.Dirs
	WS      string // the workspace root
	In      *bytes.Buffer
	Out     *bytes.Buffer
	ErrOut  *bytes.Buffer
	MCP     string // the stand-in stem-mcp binary
	Unsaved []string
	// UnsavedErr is what the editor answers instead of Unsaved.
	UnsavedErr error
	// Quit counts the editors ended without saving.
	Quit int
}

// New makes the account. The example workspace's cards are copied in.
func New(t testing.TB) *World {
	t.Helper()
	// Socket paths must stay short: the runtime directory is under /tmp.
	rt, err := os.MkdirTemp("/tmp", "sc")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	t.Cleanup(func() { os.RemoveAll(rt) })
	base := t.TempDir()
	w := &World{Engine: enginetest.NewFake(), WS: filepath.Join(base, "ws"), MCP: filepath.Join(base, "stem-mcp")}
	w.Dirs = xdg.Dirs{Home: filepath.Join(base, "home"), State: filepath.Join(base, "state"), Config: filepath.Join(base, "config"),
		Runtime: rt, UID: os.Getuid()}
	for _, d := range []string{w.Dirs.Home, w.Dirs.State, w.Dirs.Config} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(w.WS, os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "workspace"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.MCP, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ios, in, out, errOut := iostreams.Test()
	w.In, w.Out, w.ErrOut = in, out, errOut
	env := map[string]string{"HOME": w.Dirs.Home, "STEM_WORKSPACE": w.WS}
	reg, err := registry.Open(w.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	layout := sockets.Layout{Runtime: rt}
	servers := verify.Servers{Tmux: enginetest.Probe, Nvim: enginetest.Probe}
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return env[k] },
		Dirs:      func() (xdg.Dirs, error) { return w.Dirs, nil },
		Registry:  func() (*registry.Registry, error) { return reg, nil },
		Workspace: func() (*workspace.Workspace, error) { return workspace.Open(w.WS) },
		Engine:    func(context.Context) (engine.Engine, error) { return w.Engine, nil },
		MCPBinary: func() (string, error) { return w.MCP, nil },
		Self:      func() (string, error) { return filepath.Join(base, "stemctl"), nil },
		Layout:    func() (sockets.Layout, error) { return layout, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(w.Dirs.State) },
		Checker: func(context.Context) (*verify.Checker, error) {
			return &verify.Checker{Layout: layout, Registry: reg, Inspector: w.Engine, Servers: servers}, nil
		},
	}
	f.Manager = func(context.Context) (*instance.Manager, error) {
		return &instance.Manager{
			Engine: w.Engine, Registry: reg, Layout: layout, MCPBinary: w.MCP, Workspace: w.WS,
			Servers: servers, Progress: errOut, SocketTimeout: 2 * time.Second,
			DigestCache:  filepath.Join(base, "cache", "mcp-digest.json"),
			NvimModified: func(context.Context, string) ([]string, error) { return w.Unsaved, w.UnsavedErr },
			NvimQuit:     func(context.Context, string) { w.Quit++ },
		}, nil
	}
	w.F = f
	return w
}

// Run runs cmd with args and returns its error; Out and ErrOut hold what
// it printed (emptied first).
func (w *World) Run(cmd *cobra.Command, args ...string) error {
	w.Out.Reset()
	w.ErrOut.Reset()
	cmd.SetArgs(args)
	cmd.SetOut(w.Out)
	cmd.SetErr(w.ErrOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cmd.ExecuteContext(ctx)
}
