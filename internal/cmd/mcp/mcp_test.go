package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	mcpstatus "github.com/stem-edu/stem/internal/cmd/mcp/status"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
)

// fakeEngine stands in for Podman: these tests are about the commands, and
// verify's container checks run against real containers in internal/verify's
// callers. The tmux and nvim probes are real.
type fakeEngine map[string]engine.Container

func (f fakeEngine) Inspect(_ context.Context, id string) (engine.Container, error) {
	c, ok := f[id]
	if !ok {
		return engine.Container{}, fmt.Errorf("container %s: %w", id, engine.ErrNotFound)
	}
	return c, nil
}

type world struct {
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
	layout      sockets.Layout
	reg         *registry.Registry
	log         *audit.Log
	eng         fakeEngine
}

func newWorld(t *testing.T) *world {
	t.Helper()
	// Under /tmp, short: socket paths must stay under the AF_UNIX limit.
	rt, err := os.MkdirTemp("/tmp", "mc")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	state := t.TempDir()
	reg, err := registry.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := iostreams.Test()
	w := &world{out: out, errOut: errOut, layout: sockets.Layout{Runtime: rt}, reg: reg, log: log, eng: fakeEngine{}}
	w.f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(string) string { return "" },
		Registry:  func() (*registry.Registry, error) { return reg, nil },
		Layout:    func() (sockets.Layout, error) { return w.layout, nil },
		Audit:     func() (*audit.Log, error) { return log, nil },
		Checker: func(context.Context) (*verify.Checker, error) {
			return &verify.Checker{Layout: w.layout, Registry: reg, Inspector: w.eng, Servers: verify.Servers{Tmux: probe.Tmux, Nvim: probe.Nvim}}, nil
		},
	}
	return w
}

// add registers an instance with a running (fake) container and its socket
// directory; with servers, real tmux and nvim listen on its sockets.
func (w *world) add(t *testing.T, name, id string, servers bool) registry.Record {
	t.Helper()
	th, ik := sockets.ThreadKey("/ws"), sockets.InstanceKey(name)
	dir, err := w.layout.ForContainer(th, ik, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.layout.Create(dir); err != nil {
		t.Fatal(err)
	}
	if err := sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{ID: id, Instance: name, SocketDir: dir.Path}); err != nil {
		t.Fatal(err)
	}
	rec := registry.Record{Instance: name, Profile: "native-amd64", ContainerID: id, SocketDir: dir.Path, ThreadKey: th, InstanceKey: ik}
	if err := w.reg.Put(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	w.eng[id] = engine.Container{ID: id, Running: true, State: "running", Labels: map[string]string{labels.Instance: name}}
	if servers {
		startServers(t, dir)
	}
	return rec
}

// startServers runs a real tmux server with nvim inside it on dir's sockets,
// as the container's entrypoint does, and waits until both answer.
func startServers(t *testing.T, dir sockets.Dir) {
	t.Helper()
	testenv.Require(t, "tmux", "nvim")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", "-S", dir.Tmux(), "-f", "/dev/null", "new-session", "-d", "-s", "stem",
		"exec nvim --clean --listen "+dir.Nvim())
	cmd.Env = append(os.Environ(), "TMUX=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { killServers(dir) })
	deadline := time.Now().Add(15 * time.Second)
	for {
		e1, e2 := probe.Tmux(ctx, dir.Tmux()), probe.Nvim(ctx, dir.Nvim())
		if e1 == nil && e2 == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers not ready: tmux: %v; nvim: %v", e1, e2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func killServers(dir sockets.Dir) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exec.CommandContext(ctx, "tmux", "-S", dir.Tmux(), "kill-server").Run()
}

func (w *world) run(t *testing.T, args ...string) error {
	t.Helper()
	w.out.Reset()
	w.errOut.Reset()
	cmd := NewCmdMCP(w.f)
	cmd.SetArgs(args)
	cmd.SetOut(w.out)
	cmd.SetErr(w.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

// ids sharing their first 12 hex digits, so a 12-digit prefix is ambiguous.
var (
	idA = "abcdef012345" + strings.Repeat("a", 52)
	idB = "abcdef012345" + strings.Repeat("b", 52)
	idC = strings.Repeat("c", 64)
)

func TestList(t *testing.T) {
	w := newWorld(t)
	if err := w.run(t, "list"); err != nil {
		t.Fatal(err)
	}
	if w.out.Len() != 0 || !strings.Contains(w.errOut.String(), "stemctl up") {
		t.Fatalf("empty registry: out %q err %q", w.out.String(), w.errOut.String())
	}
	if err := w.run(t, "list", "--json"); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(w.out.String()) != "[]" {
		t.Fatalf("empty registry --json = %q, want []", w.out.String())
	}

	a := w.add(t, "native-amd64-demo-hello-t1", idA, false)
	c := w.add(t, "hazard3-sim-inf-bss-t4", idC, false)
	// mcp list reads the selection without verifying it: pointing the link
	// at c is enough to mark it.
	if err := selection.Select(w.layout, sockets.Dir{Path: c.SocketDir}); err != nil {
		t.Fatal(err)
	}
	if err := w.run(t, "list", "--json"); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Instance    string `json:"instance"`
		ContainerID string `json:"container_id"`
		SocketDir   string `json:"socket_dir"`
		Selected    bool   `json:"selected"`
	}
	if err := json.Unmarshal(w.out.Bytes(), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, w.out.String())
	}
	got := map[string]int{}
	for i, r := range rows {
		got[r.Instance] = i
	}
	ra, rc := rows[got[a.Instance]], rows[got[c.Instance]]
	if len(rows) != 2 || ra.ContainerID != idA || ra.SocketDir != a.SocketDir || ra.Selected || rc.ContainerID != idC || !rc.Selected {
		t.Fatalf("list --json = %+v", rows)
	}

	if err := w.run(t, "list"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(w.out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SELECTED") {
		t.Fatalf("table:\n%s", w.out.String())
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case strings.Contains(l, c.Instance):
			// Selected row: marked, short container id, socket dir.
			if f[0] != "*" || f[2] != idC[:12] || f[3] != c.SocketDir {
				t.Fatalf("selected row %q", l)
			}
		case strings.Contains(l, a.Instance):
			if f[0] != a.Instance || f[1] != idA[:12] {
				t.Fatalf("unselected row %q", l)
			}
		default:
			t.Fatalf("unexpected row %q", l)
		}
	}
}

// linkState is everything about the selection link a failed select must
// leave alone: target bytes, inode, and the directory's entries (no
// temporary link left behind).
type linkState struct {
	target string
	ino    uint64
	ents   string
}

func snapshot(t *testing.T, l sockets.Layout) linkState {
	t.Helper()
	target, err := os.Readlink(l.Selected())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(l.Selected())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Dir(l.Selected()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return linkState{target, fi.Sys().(*syscall.Stat_t).Ino, strings.Join(names, ",")}
}

func TestSelect(t *testing.T) {
	w := newWorld(t)
	a := w.add(t, "native-amd64-demo-hello-t1", idA, true)
	c := w.add(t, "hazard3-sim-inf-bss-t4", idC, true)

	// By instance name.
	if err := w.run(t, "select", a.Instance); err != nil {
		t.Fatalf("select %s: %v\n%s", a.Instance, err, w.errOut.String())
	}
	if cur, _ := selection.Current(w.layout); cur != a.SocketDir {
		t.Fatalf("selection %s, want %s", cur, a.SocketDir)
	}
	if !strings.Contains(w.out.String(), "selected "+a.Instance+" (container "+idA[:12]+")") {
		t.Fatalf("select output: %q", w.out.String())
	}

	// By a container id prefix (12 digits is the shortest registry accepts).
	if err := w.run(t, "select", "--json", idC[:12]); err != nil {
		t.Fatalf("select by prefix: %v", err)
	}
	var res struct {
		Instance    string `json:"instance"`
		ContainerID string `json:"container_id"`
		SocketDir   string `json:"socket_dir"`
		Selected    string `json:"selected"`
	}
	if err := json.Unmarshal(w.out.Bytes(), &res); err != nil {
		t.Fatalf("select --json: %v\n%s", err, w.out.String())
	}
	if res.Instance != c.Instance || res.ContainerID != idC || res.SocketDir != c.SocketDir || res.Selected != w.layout.Selected() {
		t.Fatalf("select --json = %+v", res)
	}
	if cur, _ := selection.Current(w.layout); cur != c.SocketDir {
		t.Fatalf("selection %s, want %s", cur, c.SocketDir)
	}
	// The selected sockets answer through the fixed path providers dial
	// (a plain connect: the kernel follows the `current` link), and stem's
	// own clients reach them in the directory the link names (unixpin
	// follows no symlink in place of a socket's directory).
	if conn, err := net.Dial("unix", filepath.Join(w.layout.Selected(), sockets.TmuxSocket)); err != nil {
		t.Fatalf("tmux through the selection: %v", err)
	} else {
		conn.Close()
	}
	if err := probe.Tmux(context.Background(), filepath.Join(c.SocketDir, sockets.TmuxSocket)); err != nil {
		t.Fatalf("tmux of the selected directory: %v", err)
	}

	// Each select is audited.
	entries, err := w.log.Read(audit.Filter{Event: audit.Select})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Instance != a.Instance || entries[1].Instance != c.Instance || entries[1].ContainerID != idC {
		t.Fatalf("audit entries = %+v", entries)
	}
}

func TestSelectFailureLeavesSelection(t *testing.T) {
	w := newWorld(t)
	a := w.add(t, "native-amd64-demo-hello-t1", idA, true)
	w.add(t, "native-amd64-demo-hello-t2", idB, false) // registered, but nothing listens
	if err := w.run(t, "select", a.Instance); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, w.layout)

	for _, c := range []struct {
		ref, check, want string
	}{
		{"nope", "registry", `"nope" (known: `},
		{"abcdef012345", "registry", "matches 2 instances"},       // ambiguous prefix
		{"native-amd64-demo-hello-t2", "tmux", "does not answer"}, // sockets dead
		{idB[:13], "tmux", "does not answer"},                     // the same, by unique prefix
	} {
		err := w.run(t, "select", c.ref)
		var ve *verify.Error
		if err == nil || !errors.As(err, &ve) || ve.Check != c.check || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "not selected:") {
			t.Fatalf("select %s: %v, want a %s failure mentioning %q", c.ref, err, c.check, c.want)
		}
		if w.out.Len() != 0 {
			t.Fatalf("select %s printed %q", c.ref, w.out.String())
		}
		if after := snapshot(t, w.layout); after != before {
			t.Fatalf("select %s changed the selection: %+v -> %+v", c.ref, before, after)
		}
	}
	// Only the successful select was audited.
	entries, _ := w.log.Read(audit.Filter{Event: audit.Select})
	if len(entries) != 1 {
		t.Fatalf("audit entries = %+v", entries)
	}
}

func TestStatus(t *testing.T) {
	w := newWorld(t)
	// Nothing selected: exit 3 and say so.
	err := w.run(t, "status")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(w.out.String(), "nothing selected") {
		t.Fatalf("no selection: %v %q", err, w.out.String())
	}
	err = w.run(t, "status", "--json")
	var res mcpstatus.Result
	if json.Unmarshal(w.out.Bytes(), &res) != nil || res.Selected || res.OK || res.Link != w.layout.Selected() || !errors.As(err, &ee) {
		t.Fatalf("no selection --json: %v %s", err, w.out.String())
	}

	a := w.add(t, "native-amd64-demo-hello-t1", idA, true)
	if err := w.run(t, "select", a.Instance); err != nil {
		t.Fatal(err)
	}
	if err := w.run(t, "status"); err != nil {
		t.Fatalf("healthy: %v\n%s", err, w.out.String())
	}
	for _, want := range []string{"selected   " + a.Instance, "container  " + idA, "sockets    " + a.SocketDir, "tmux and nvim answer"} {
		if !strings.Contains(w.out.String(), want) {
			t.Fatalf("status lacks %q:\n%s", want, w.out.String())
		}
	}
	if err := w.run(t, "status", "--json"); err != nil {
		t.Fatal(err)
	}
	res = mcpstatus.Result{}
	if err := json.Unmarshal(w.out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if want := (mcpstatus.Result{Selected: true, Link: w.layout.Selected(), Target: a.SocketDir, Instance: a.Instance, ContainerID: idA, OK: true}); res != want {
		t.Fatalf("status --json = %+v, want %+v", res, want)
	}

	// The servers stop: status names the failed check and exits 3.
	killServers(sockets.Dir{Path: a.SocketDir})
	err = w.run(t, "status", "--json")
	res = mcpstatus.Result{}
	if json.Unmarshal(w.out.Bytes(), &res) != nil || !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("dead servers: %v %s", err, w.out.String())
	}
	if !res.Selected || res.OK || res.Check != "tmux" || res.Instance != a.Instance || !strings.Contains(res.Error, "does not answer") {
		t.Fatalf("dead servers --json = %+v", res)
	}
	if err := w.run(t, "status"); !errors.As(err, &ee) || !strings.Contains(w.out.String(), "problem    instance "+a.Instance+": tmux check failed") {
		t.Fatalf("dead servers: %v\n%s", err, w.out.String())
	}
}
