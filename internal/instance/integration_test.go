package instance_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/inspect"
	"github.com/stem-edu/stem/internal/engine/podman"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

// world is a private account: runtime, state and workspace directories, a
// real Podman engine and a manager.
type world struct {
	t   testing.TB
	m   *instance.Manager
	ws  *workspace.Workspace
	bin string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	testenv.Require(t, "podman", "tmux")
	rt, err := os.MkdirTemp("/tmp", "si")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	t.Cleanup(func() { os.RemoveAll(rt) })
	base := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(base, "cache")) // the binary's digest cache
	wsRoot := filepath.Join(base, "ws")
	cmd := exec.Command("cp", "-a", filepath.Join(testenv.RepoRoot(), "examples", "workspace")+"/.", wsRoot)
	os.MkdirAll(wsRoot, 0o755)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copy workspace: %v %s", err, out)
	}
	ws, err := workspace.Open(wsRoot)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := podman.Connect(ctx, podman.Options{StartService: true, LogDir: base})
	if err != nil {
		t.Fatalf("podman: %v", err)
	}
	reg, err := registry.Open(filepath.Join(base, "state"))
	if err != nil {
		t.Fatal(err)
	}
	// Any executable will do as the mounted stem-mcp for these tests.
	bin := filepath.Join(base, "stem-mcp")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ws: ws, bin: bin, m: &instance.Manager{
		Engine: e, Registry: reg, Layout: sockets.Layout{Runtime: rt}, MCPBinary: bin,
		Servers: verify.Servers{Tmux: probe.Tmux, Nvim: probe.Nvim, TmuxInside: instance.TmuxInside(e)}, Progress: testWriter{t},
		IDMap: idmap.ForCaller,
	}}
	t.Cleanup(func() {
		recs, _ := reg.List(context.Background())
		for _, r := range recs {
			w.m.Remove(context.Background(), r.Instance)
		}
	})
	return w
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *world) resolve(profile, series, card, task, target string) *workspace.Resolved {
	w.t.Helper()
	r, err := w.ws.Resolve(profile, series, card, task, target)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *world) up(r *workspace.Resolved) instance.UpResult {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := w.m.Up(ctx, r, instance.UpOptions{})
	if err != nil {
		w.t.Fatalf("up: %v", err)
	}
	return res
}

func (w *world) checker() *verify.Checker {
	return &verify.Checker{Layout: w.m.Layout, Registry: w.m.Registry, Inspector: inspect.New(os.Getenv), Servers: verify.Servers{Tmux: probe.Tmux, Nvim: probe.Nvim}}
}

func TestUpCreatesReusesAndRecreates(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")

	first := w.up(r)
	rec := first.Record
	if first.Action != instance.Created || rec.Instance != "native-amd64-demo-hello-t1" {
		t.Fatalf("first up: %+v", first)
	}
	t.Logf("created in %s", first.Duration)
	// Labels, mounts, sockets answering from the host, container.json,
	// card-side state.
	c, err := w.m.Engine.Inspect(ctx, rec.ContainerID)
	if err != nil || !c.Running {
		t.Fatalf("inspect: %+v %v", c, err)
	}
	for k, v := range map[string]string{labels.Instance: rec.Instance, labels.Profile: "native-amd64", labels.Series: "demo", labels.Card: "hello",
		labels.Task: "1", labels.Target: "amd64", labels.Schema: labels.SchemaVersion, labels.ConfigHash: rec.ConfigHash} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if !strings.HasSuffix(rec.SocketDir, "/"+rec.ContainerID[:12]) {
		t.Fatalf("socket dir %s does not end in the container id", rec.SocketDir)
	}
	if err := probe.Tmux(ctx, rec.Dir().Tmux()); err != nil {
		t.Fatalf("tmux from the host: %v", err)
	}
	if err := probe.Nvim(ctx, rec.Dir().Nvim()); err != nil {
		t.Fatalf("nvim from the host: %v", err)
	}
	var info sockets.ContainerInfo
	if err := sockets.ReadJSON(rec.SocketDir, sockets.ContainerJSON, &info); err != nil || info.ID != rec.ContainerID {
		t.Fatalf("container.json: %+v %v", info, err)
	}
	var st registry.Record
	if _, err := cardstate.Read(rec.CardPath, rec.Instance, &st); err != nil || st.ContainerID != rec.ContainerID {
		t.Fatalf("card state: %v", err)
	}
	if _, err := w.checker().Instance(ctx, rec.Instance); err != nil {
		t.Fatalf("verify: %v", err)
	}
	// The container sees the card at the same path and can write there.
	if code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c", "test -f stem.toml -o -f ../stem.toml && touch from-container"}, WorkDir: r.TaskDir}); err != nil || code != 0 {
		t.Fatalf("exec in card: %d %v", code, err)
	}
	if _, err := os.Stat(filepath.Join(r.TaskDir, "from-container")); err != nil {
		t.Fatal("the card is not shared at the same path")
	}

	// Reuse.
	again := w.up(r)
	if again.Action != instance.Reused || again.Record.ContainerID != rec.ContainerID {
		t.Fatalf("second up: %+v", again)
	}
	t.Logf("reused in %s", again.Duration)

	// A configuration change re-creates: new id, new directory, the old
	// directory gone and its sockets dead.
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755)
	re := w.up(r)
	if re.Action != instance.Recreated || re.Record.ContainerID == rec.ContainerID || re.Record.SocketDir == rec.SocketDir {
		t.Fatalf("re-create: %+v", re)
	}
	if _, err := os.Stat(rec.SocketDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old socket directory still exists: %v", err)
	}
	if err := probe.Tmux(ctx, rec.Dir().Tmux()); err == nil {
		t.Fatal("the old tmux socket still answers")
	}
	// Verifying the old record (as a stale consumer would) fails.
	if _, err := w.checker().Record(ctx, rec); err == nil {
		t.Fatal("the old record still verifies")
	}
	if _, err := w.checker().Instance(ctx, rec.Instance); err != nil {
		t.Fatalf("the new record does not verify: %v", err)
	}
}

func TestUpRepairsAndRestarts(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record

	// Stopped: status says so; up starts the same container again.
	if _, err := w.m.Down(ctx, rec.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.m.Status(ctx, rec.Instance); st.State != "stopped" {
		t.Fatalf("after down: %s", st.State)
	}
	res := w.up(r)
	if res.Action != instance.Started || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up after down: %+v", res)
	}

	// A stale sibling directory (a predecessor's) is removed by the next
	// re-creation, and removed behind our back: status says so, up repairs.
	stale := filepath.Join(filepath.Dir(rec.SocketDir), "0123456789ab")
	os.Mkdir(stale, 0o700)
	if err := w.m.Engine.Remove(ctx, rec.ContainerID, true); err != nil {
		t.Fatal(err)
	}
	st, err := w.m.Status(ctx, rec.Instance)
	if err != nil || st.State != "missing" || len(st.Problems) == 0 || !strings.Contains(st.Problems[0], "stemctl up") {
		t.Fatalf("status of a removed container: %+v %v", st, err)
	}
	if _, err := w.m.Running(ctx, rec.Instance); err == nil || !strings.Contains(err.Error(), "re-create") {
		t.Fatalf("running check: %v", err)
	}
	fixed := w.up(r)
	if fixed.Action != instance.Recreated || !strings.Contains(fixed.Reason, "removed") {
		t.Fatalf("repair: %+v", fixed)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale socket directory survived a re-creation")
	}
}

func TestUpRefusesRuntimeDirNotOurs(t *testing.T) {
	w := newWorld(t)
	os.Chmod(w.m.Layout.Runtime, 0o755)
	defer os.Chmod(w.m.Layout.Runtime, 0o700)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := w.m.Up(ctx, w.resolve("native-amd64", "demo", "hello", "1", ""), instance.UpOptions{})
	if err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("up with a 0755 runtime dir: %v", err)
	}
	if list, _ := w.m.Engine.List(ctx, map[string]string{labels.Instance: "native-amd64-demo-hello-t1", labels.Workspace: w.ws.Root}); len(list) != 0 {
		t.Fatal("a container was created although up refused")
	}
	if recs, _ := w.m.Registry.List(ctx); len(recs) != 0 {
		t.Fatal("a record was written although up refused")
	}
}

func TestRemoveClearsEverything(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rec := w.up(w.resolve("hazard3-sim", "inf", "bss", "4", "")).Record
	if err := selection.Select(w.m.Layout, rec.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.m.Remove(ctx, rec.Instance); err != nil {
		t.Fatal(err)
	}
	if _, err := w.m.Engine.Inspect(ctx, rec.ContainerID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("container survived rm: %v", err)
	}
	if _, err := os.Stat(rec.SocketDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("socket directory survived rm")
	}
	if _, err := w.m.Registry.Get(ctx, rec.Instance); !errors.Is(err, registry.ErrNotFound) {
		t.Fatal("record survived rm")
	}
	if _, err := selection.Current(w.m.Layout); !errors.Is(err, selection.ErrNone) {
		t.Fatal("selection still points at a removed instance")
	}
	if _, err := os.Stat(filepath.Join(rec.CardPath, "stem.toml")); err != nil {
		t.Fatal("rm touched the card repository")
	}
}

func TestHazard3TaskBuildsAndRunsInside(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r := w.resolve("hazard3-sim", "inf", "bss", "4", "")
	rec := w.up(r).Record
	var out strings.Builder
	for _, cmd := range []string{r.Commands.Build, r.Commands.Test, r.Commands.Run} {
		out.Reset()
		code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"bash", "-c", cmd}, WorkDir: r.TaskDir, Stdout: &out, Stderr: &out})
		if err != nil || code != 0 {
			t.Fatalf("%q in the container: exit %d %v\n%s", cmd, code, err, out.String())
		}
	}
}

func TestSameTaskInAnotherWorkspace(t *testing.T) {
	w := newWorld(t)
	rec := w.up(w.resolve("native-amd64", "demo", "hello", "1", "")).Record
	// A second workspace on the same account.
	other := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(testenv.RepoRoot(), "examples", "workspace")+"/.", other).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	ws2, _ := workspace.Open(other)
	r2, _ := ws2.Resolve("native-amd64", "demo", "hello", "1", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := w.m.Up(ctx, r2, instance.UpOptions{})
	if err == nil || !strings.Contains(err.Error(), "belongs to workspace") {
		t.Fatalf("same instance from another workspace: %v", err)
	}
	if got, _ := w.m.Registry.Get(ctx, rec.Instance); got.ContainerID != rec.ContainerID {
		t.Fatal("the refused up changed the record")
	}
}

// TestGitReadOnlyInside: the card's .git is a read-only mount point in the
// container: nothing in it can be written, and it cannot be renamed,
// removed or replaced. (internal/cmd/e2e tries every route with git on the
// host afterwards; this is the mount itself.)
func TestGitReadOnlyInside(t *testing.T) {
	w := newWorld(t)
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=s", "-c", "user.email=s@x", "commit", "-qm", "card"}} {
		if out, err := exec.Command("git", append([]string{"-C", r.CardPath}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	rec := w.up(r).Record
	if rec.Git == nil || rec.Git.Kind != "dir" {
		t.Fatalf("the record keeps no .git identity: %+v", rec.Git)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	sh := func(script string) int {
		out.Reset()
		code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c", script}, WorkDir: r.CardPath, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	for _, script := range []string{
		"echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
		"git config core.hooksPath /tmp",
		"echo '[core]' > .git/config.worktree",
		"mv .git .git-old",
		"rm -rf .git",
		"rmdir .git",
		"mv t1 t1x && mv .git t1x/",
	} {
		if sh(script) == 0 {
			t.Errorf("in the container, %q worked", script)
		}
	}
	// EBUSY (a mount point), or EACCES first: moving a directory rewrites
	// its "..", and the container's root may not write the student's .git.
	if !strings.Contains(out.String(), "busy") && !strings.Contains(out.String(), "Permission denied") {
		t.Errorf("renaming the mount point: %q, want EBUSY or EACCES", out.String())
	}
	sh("mv t1x t1")
	if code := sh("git -c user.name=s -c user.email=s@x commit -qam 'from the container'"); code == 0 || !strings.Contains(out.String(), "Read-only file system") {
		t.Fatalf("a commit inside the container: %d %s", code, out.String())
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git/config.worktree", ".git-old"} {
		if _, err := os.Lstat(filepath.Join(r.CardPath, p)); err == nil {
			t.Errorf("%s appeared on the host", p)
		}
	}
}
