package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/enginetest"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// Options choose the server's level and what it may serve.
type Options struct {
	Level mcpserver.Level
	// AllowedInstances is the SSH grant's list (nil: any instance).
	AllowedInstances []string
	// Share serves the instance of another harness (its directories,
	// record and fakes) from a second server, as a second client would.
	Share *Harness
	// GateStatus, when set, serves the session as the SSH gate does: its
	// gate_status tool answers with what this returns.
	GateStatus func(context.Context) (any, error)
}

// Harness is one in-process stem-mcp session on a fake instance.
type Harness struct {
	T      testing.TB
	Client *client.Client
	Server *mcpserver.Server
	// Instance is the fixture's account and record, with the helpers of
	// package testenv that act on them (AllowPane, AllowEdit,
	// SetPolicyFloor...); no container or server is started for it.
	Instance *testenv.Instance
	Engine   *enginetest.Fake
	Tmux     *Tmux
	Nvim     *Nvim
	GDB      *GDB
	// Down, when set, is what connecting to the instance fails with (its
	// tmux does not answer).
	connErr error
	mu      sync.Mutex
	log     *bytes.Buffer
	end     func() error
}

// New starts a server at opt.Level on a fresh fake instance of the demo
// task (examples/workspace demo/hello, task 1), selected as the student's
// `stemctl mcp select` would, and an initialized client.
func New(t testing.TB, opt Options) *Harness {
	t.Helper()
	h := &Harness{T: t, log: &bytes.Buffer{}}
	if opt.Share != nil {
		h.Instance, h.Engine, h.Tmux, h.Nvim, h.GDB = opt.Share.Instance, opt.Share.Engine, opt.Share.Tmux, opt.Share.Nvim, opt.Share.GDB
	} else {
		h.Instance, h.Engine = newInstance(t), enginetest.NewFake()
		h.Engine.Seed = h.Instance.Dirs.Runtime // unique: every harness has its own container id
		h.Tmux, h.Nvim, h.GDB = NewTmux(), NewNvim(), NewGDB()
		h.startContainer(t)
		h.Instance.Select(t)
	}
	in := h.Instance
	s, err := mcpserver.New(mcpserver.Options{
		Level: opt.Level, AllowedInstances: opt.AllowedInstances,
		Identity: mcpserver.Identity{Account: "mcptest"},
		Getenv:   func(string) string { return "" }, ErrOut: lockedWriter{h},
		Inspector: h.Engine,
		Dirs:      &xdg.Dirs{Runtime: in.Dirs.Runtime, State: in.Dirs.State, Config: in.Dirs.Config, Home: in.Dirs.Home},
		Connect:   h.connect, GateStatus: opt.GateStatus,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl, end, err := s.InProcess(ctx, mcp.Implementation{Name: "mcptest", Version: "1"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.Server, h.Client, h.end = s, cl, end
	t.Cleanup(func() {
		h.End()
		cancel()
		s.Close()
	})
	return h
}

// End ends the session (audited as the end of stdin ends it); later calls
// fail.
func (h *Harness) End() error { return h.end() }

// connect is the server's Connector: the fakes, unless connecting was made
// to fail.
func (h *Harness) connect(_ context.Context, _ verify.Target, _ func(string, ...any)) (mcpserver.Parts, error) {
	h.mu.Lock()
	err := h.connErr
	h.mu.Unlock()
	if err != nil {
		return mcpserver.Parts{}, err
	}
	return mcpserver.Parts{Tmux: h.Tmux, Nvim: h.Nvim, GDB: h.GDB.Dial}, nil
}

// FailConnect makes the next connection to the instance fail with err.
func (h *Harness) FailConnect(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connErr = err
}

// Log is what the server wrote on its stderr.
func (h *Harness) Log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.String()
}

type lockedWriter struct{ h *Harness }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.log.Write(p)
}

// newInstance lays out an account (runtime, state, config, home, a copy of
// the demo card) and resolves its task.
func newInstance(t testing.TB) *testenv.Instance {
	t.Helper()
	// Socket paths must stay short: the runtime directory is in /tmp.
	rt, err := os.MkdirTemp("/tmp", "smt")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	t.Cleanup(func() { os.RemoveAll(rt) })
	base := t.TempDir()
	in := &testenv.Instance{Dirs: xdg.Dirs{Runtime: rt, State: filepath.Join(base, "state"), Config: filepath.Join(base, "config"),
		Home: filepath.Join(base, "home"), UID: os.Getuid()}}
	wsRoot := filepath.Join(base, "ws")
	for _, d := range []string{in.Dirs.State, in.Dirs.Config, in.Dirs.Home, wsRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	in.Layout = sockets.Layout{Runtime: rt}
	if err := os.CopyFS(filepath.Join(wsRoot, "demo", "hello"), os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "workspace", "demo", "hello"))); err != nil {
		t.Fatalf("copy the demo card: %v", err)
	}
	ws, err := workspace.Open(wsRoot)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.Resolve("native-amd64", "demo", "hello", "1", "")
	if err != nil {
		t.Fatal(err)
	}
	in.Resolved = r
	in.Name = fmt.Sprintf("%s-%s-%s-t%s", r.Profile.Name, r.Series, r.Card, r.TaskID)
	return in
}

// startContainer creates the instance's container in the fake engine, its
// socket directory, container.json and registry record, as `stemctl up`
// does.
func (h *Harness) startContainer(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, r := h.Instance, h.Instance.Resolved
	lbl := map[string]string{labels.Managed: "true", labels.Instance: in.Name, labels.Profile: r.Profile.Name, labels.Series: r.Series,
		labels.Card: r.Card, labels.Task: r.TaskID, labels.Target: r.Target.Name, labels.Schema: labels.SchemaVersion, labels.Workspace: r.Workspace}
	tk, ik := sockets.ThreadKey(r.Workspace), sockets.InstanceKey(in.Name)
	id, err := h.Engine.Create(ctx, engine.Spec{Name: "stem-mcptest", Image: testenv.BaseImage, Labels: lbl,
		Env: map[string]string{"STEM_INSTANCE_DIR": in.Layout.InstanceDir(tk, ik)}})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := in.Layout.ForContainer(tk, ik, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Layout.Create(dir); err != nil {
		t.Fatal(err)
	}
	in.Dir, in.Container = dir, "stem-mcptest"
	if err := sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{ID: id, Name: in.Container, Instance: in.Name,
		Profile: r.Profile.Name, Labels: lbl, SocketDir: dir.Path}); err != nil {
		t.Fatal(err)
	}
	// The fake's servers listen on t.sock and n.sock (verification wants
	// sockets there); the server talks to the fakes instead.
	if err := h.Engine.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Engine.Remove(context.Background(), id, true) })
	in.Record = registry.Record{Instance: in.Name, Profile: r.Profile.Name, Series: r.Series, Card: r.Card, Task: r.TaskID, Target: r.Target.Name,
		ContainerID: id, Image: testenv.BaseImage, Schema: 1, SocketDir: dir.Path, ThreadKey: tk, InstanceKey: ik,
		CardPath: r.CardPath, Workspace: r.Workspace, Labels: lbl, Policy: &r.Policy}
	reg, err := registry.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(ctx, in.Record); err != nil {
		t.Fatal(err)
	}
	in.SetEditableFloor(t, r.Editable)
}

// Result is a tool call's outcome as a client sees it.
type Result struct {
	IsError bool
	// Fields is the first content's JSON (nil for an error).
	Fields map[string]any
	// Text is the second content (a pane's or buffer's text), or an
	// error's text.
	Text string
	// Code is an error's code from its structured content.
	Code errcode.Code
}

// Call calls a tool through the MCP client; a protocol error (an unknown
// tool, arguments the schema refuses) fails the test unless wantProtocolErr.
func (h *Harness) Call(name string, args map[string]any) Result {
	h.T.Helper()
	r, err := h.CallErr(name, args)
	if err != nil {
		h.T.Fatalf("%s: %v", name, err)
	}
	return r
}

// CallErr is Call returning a protocol error.
func (h *Harness) CallErr(name string, args map[string]any) (Result, error) {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := h.Client.CallTool(ctx, req)
	if err != nil {
		return Result{}, err
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	out := Result{IsError: res.IsError}
	if res.IsError {
		out.Text = strings.Join(texts, "")
		var w errcode.Wire
		if data, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(data, &w) == nil {
			out.Code = w.Error.Code
		}
		return out, nil
	}
	if len(texts) == 0 || json.Unmarshal([]byte(texts[0]), &out.Fields) != nil {
		return Result{}, fmt.Errorf("%s: result is not JSON: %q", name, texts)
	}
	if len(texts) > 1 {
		out.Text = texts[1]
	}
	return out, nil
}

// Tools lists the tools the client sees, in the server's order.
func (h *Harness) Tools() []string {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.Client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		h.T.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// Audit returns the entries of the account's audit log.
func (h *Harness) Audit() []audit.Entry {
	h.T.Helper()
	lg, err := audit.Open(h.Instance.Dirs.State)
	if err != nil {
		h.T.Fatal(err)
	}
	es, err := lg.Read(audit.Filter{})
	if err != nil {
		h.T.Fatal(err)
	}
	return es
}
