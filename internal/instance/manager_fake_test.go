package instance_test

// The Manager's decisions against fakeEngine: these run under -short in
// milliseconds; the same paths against real Podman are in
// integration_test.go and recreate_test.go.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/enginetest"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
)

// fakeWorld is a private account whose Manager drives a fakeEngine.
type fakeWorld struct {
	t   *testing.T
	e   *enginetest.Fake
	m   *instance.Manager
	r   *workspace.Resolved
	bin string
	opt instance.UpOptions // what the command under test passes
}

func newFakeWorld(t *testing.T) *fakeWorld {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the binary's digest cache
	rt, err := os.MkdirTemp("/tmp", "sf")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	t.Cleanup(func() { os.RemoveAll(rt) })
	base := t.TempDir()
	wsRoot := filepath.Join(base, "ws")
	card := filepath.Join("demo", "hello")
	if err := os.CopyFS(filepath.Join(wsRoot, card), os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "workspace", card))); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(wsRoot)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.Resolve("native-amd64", "demo", "hello", "1", "")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(filepath.Join(base, "state"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "stem-mcp")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := enginetest.NewFake()
	return &fakeWorld{t: t, e: e, r: r, bin: bin, m: &instance.Manager{
		Engine: e, Registry: reg, Layout: sockets.Layout{Runtime: rt}, MCPBinary: bin,
		Servers: verify.Servers{Tmux: enginetest.Probe, Nvim: enginetest.Probe}, Progress: testWriter{t},
		SocketTimeout: 2 * time.Second,
	}}
}

func (w *fakeWorld) up() (instance.UpResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.m.Up(ctx, w.r, w.opt)
}

func (w *fakeWorld) mustUp(want instance.Action) instance.UpResult {
	w.t.Helper()
	res, err := w.up()
	if err != nil {
		w.t.Fatalf("up: %v", err)
	}
	if res.Action != want {
		w.t.Fatalf("up: %s (%s), want %s", res.Action, res.Reason, want)
	}
	return res
}

// rebuild changes the stem-mcp binary's content: the configuration changes.
func (w *fakeWorld) rebuild(mark string) {
	w.t.Helper()
	if err := os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # "+mark+"\n"), 0o755); err != nil {
		w.t.Fatal(err)
	}
}

func (w *fakeWorld) containers() []engine.Container {
	w.t.Helper()
	list, err := w.e.List(context.Background(), map[string]string{labels.Instance: "native-amd64-demo-hello-t1"})
	if err != nil {
		w.t.Fatal(err)
	}
	return list
}

func (w *fakeWorld) record(name string) registry.Record {
	w.t.Helper()
	rec, err := w.m.Registry.Get(context.Background(), name)
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

func answers(t *testing.T, dir sockets.Dir) {
	t.Helper()
	for _, s := range []string{dir.Tmux(), dir.Nvim()} {
		if err := enginetest.Probe(context.Background(), s); err != nil {
			t.Errorf("%s does not answer: %v", s, err)
		}
	}
}

func TestFakeUpCreatesReusesRecreates(t *testing.T) {
	w := newFakeWorld(t)
	first := w.mustUp(instance.Created).Record
	if !strings.HasSuffix(first.SocketDir, "/"+first.ContainerID[:12]) {
		t.Fatalf("socket dir %s does not end in the container id", first.SocketDir)
	}
	if got := w.record(first.Instance); got.ContainerID != first.ContainerID || got.ConfigHash == "" {
		t.Fatalf("record %+v", got)
	}
	var info sockets.ContainerInfo
	if err := sockets.ReadJSON(first.SocketDir, sockets.ContainerJSON, &info); err != nil || info.ID != first.ContainerID {
		t.Fatalf("container.json %+v %v", info, err)
	}
	answers(t, first.Dir())
	if err := selection.Select(w.m.Layout, first.Dir()); err != nil {
		t.Fatal(err)
	}

	creates := w.e.Creates
	again := w.mustUp(instance.Reused).Record
	if again.ContainerID != first.ContainerID || w.e.Creates != creates {
		t.Fatalf("reuse made a container: %.12s, %d creates", again.ContainerID, w.e.Creates-creates)
	}

	// Rebuilt stem-mcp: a new container under the usual name, the old
	// one and its directory gone, the record and the selection follow.
	w.rebuild("rebuilt")
	res := w.mustUp(instance.Recreated)
	re := res.Record
	if re.ContainerID == first.ContainerID || re.SocketDir == first.SocketDir || re.ConfigHash == first.ConfigHash {
		t.Fatalf("re-created %+v", re)
	}
	if _, err := w.e.Inspect(context.Background(), first.ContainerID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the old container survived: %v", err)
	}
	if _, err := os.Stat(first.SocketDir); !os.IsNotExist(err) {
		t.Errorf("the old socket directory survived: %v", err)
	}
	if list := w.containers(); len(list) != 1 || list[0].ID != re.ContainerID || list[0].Name != first.Instance+"-"+first.ThreadKey {
		t.Errorf("containers after the re-creation: %+v", list)
	}
	if got := w.record(first.Instance); got.ContainerID != re.ContainerID {
		t.Errorf("the record names %.12s, want %.12s", got.ContainerID, re.ContainerID)
	}
	if cur, _ := selection.Current(w.m.Layout); cur != re.SocketDir {
		t.Errorf("the selection did not follow: %s", cur)
	}
	answers(t, re.Dir())

	// Stopped: started again, same container.
	if _, err := w.m.Down(context.Background(), re.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	if st := w.mustUp(instance.Started).Record; st.ContainerID != re.ContainerID {
		t.Fatalf("started %.12s, want %.12s", st.ContainerID, re.ContainerID)
	}
	answers(t, re.Dir())
}

// An identical stem-mcp installed again (a new file, a new mtime: a second
// make build) leaves the instance as it is; a changed one re-creates it.
func TestFakeReinstalledBinaryKeepsTheInstance(t *testing.T) {
	w := newFakeWorld(t)
	rec := w.mustUp(instance.Created).Record
	data, err := os.ReadFile(w.bin)
	if err != nil {
		t.Fatal(err)
	}
	tmp := w.bin + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	os.Chtimes(tmp, later, later)
	if err := os.Rename(tmp, w.bin); err != nil {
		t.Fatal(err)
	}
	w.opt.KeepRunning = true // as build, test and agent start run it
	if res := w.mustUp(instance.Reused); res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("reused %.12s, want %.12s", res.Record.ContainerID, rec.ContainerID)
	}
	w.opt.KeepRunning = false
	w.rebuild("changed")
	w.mustUp(instance.Recreated)
}

// A command that only uses the instance (KeepRunning) never re-creates a
// running container: it refuses and changes nothing.
func TestFakeKeepRunningRefusesRecreate(t *testing.T) {
	w := newFakeWorld(t)
	rec := w.mustUp(instance.Created).Record
	w.rebuild("rebuilt")
	w.opt.KeepRunning = true
	creates := w.e.Creates
	_, err := w.up()
	if err == nil || !strings.Contains(err.Error(), "must be re-created") || !strings.Contains(err.Error(), "stemctl up native-amd64 demo hello 1") {
		t.Fatalf("up with KeepRunning: %v", err)
	}
	if w.e.Creates != creates {
		t.Errorf("a container was created")
	}
	if c, err := w.e.Inspect(context.Background(), rec.ContainerID); err != nil || !c.Running {
		t.Errorf("the instance's container: %+v %v", c, err)
	}
}

// A re-creation whose new container cannot start keeps the old one: it is
// started again on its own directory and the record, the selection and
// the card still name it.
func TestFakeFailedRecreateKeepsTheOld(t *testing.T) {
	w := newFakeWorld(t)
	rec := w.mustUp(instance.Created).Record
	if err := selection.Select(w.m.Layout, rec.Dir()); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(w.r.CardPath, ".stem", "instances", rec.Instance, "instance.json")
	cardBefore, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	recBefore := w.record(rec.Instance)
	runtimeBefore := tree(t, w.m.Layout.Runtime)

	w.rebuild("rebuilt")
	w.e.StartErr = errors.New("OCI runtime error: setrlimit RLIMIT_NOFILE")
	_, err = w.up()
	if err == nil {
		t.Fatal("up succeeded although no new container can start")
	}
	for _, want := range []string{"re-creating " + rec.Instance + " failed", "old container " + rec.ContainerID[:12] + " was kept and started again", "RLIMIT_NOFILE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if c, err := w.e.Inspect(context.Background(), rec.ContainerID); err != nil || !c.Running {
		t.Fatalf("the old container: %+v %v", c, err)
	}
	answers(t, rec.Dir())
	if got := w.record(rec.Instance); asJSON(got) != asJSON(recBefore) {
		t.Errorf("the record changed:\n got %s\nwant %s", asJSON(got), asJSON(recBefore))
	}
	if cur, err := selection.Current(w.m.Layout); err != nil || cur != rec.SocketDir {
		t.Errorf("selection %q %v, want %s", cur, err, rec.SocketDir)
	}
	if after, _ := os.ReadFile(card); string(after) != string(cardBefore) {
		t.Errorf("the card state changed:\n%s", after)
	}
	if after := tree(t, w.m.Layout.Runtime); after != runtimeBefore {
		t.Errorf("the runtime directory changed:\nbefore:\n%s\nafter:\n%s", runtimeBefore, after)
	}
	if list := w.containers(); len(list) != 1 || list[0].ID != rec.ContainerID {
		t.Errorf("containers of the instance: %+v, want only %.12s", list, rec.ContainerID)
	}

	// Once new containers start again the re-creation goes through.
	w.e.StartErr = nil
	if re := w.mustUp(instance.Recreated).Record; re.ContainerID == rec.ContainerID {
		t.Fatalf("re-created as the same container")
	}
	if list := w.containers(); len(list) != 1 || list[0].Name != rec.Instance+"-"+rec.ThreadKey {
		t.Errorf("containers after the re-creation: %+v", list)
	}
}

// A stopped instance whose re-creation fails stays stopped and unchanged.
func TestFakeFailedRecreateOfStoppedInstance(t *testing.T) {
	w := newFakeWorld(t)
	rec := w.mustUp(instance.Created).Record
	if _, err := w.m.Down(context.Background(), rec.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	runtimeBefore := tree(t, w.m.Layout.Runtime)
	w.rebuild("rebuilt")
	w.e.StartErr = errors.New("OCI runtime error")
	if _, err := w.up(); err == nil || !strings.Contains(err.Error(), "was kept as it was") {
		t.Fatalf("up: %v", err)
	}
	if c, err := w.e.Inspect(context.Background(), rec.ContainerID); err != nil || c.Running {
		t.Fatalf("the old container: %+v %v", c, err)
	}
	if after := tree(t, w.m.Layout.Runtime); after != runtimeBefore {
		t.Errorf("the runtime directory changed:\nbefore:\n%s\nafter:\n%s", runtimeBefore, after)
	}
	if list := w.containers(); len(list) != 1 {
		t.Errorf("%d containers of the instance", len(list))
	}
}

// A first start that fails (the container does not start, or its servers
// never answer) leaves no container, record, socket directory, runtime
// level or card state behind, and says why.
func TestFakeFailedFirstCreateLeavesNothing(t *testing.T) {
	for name, broken := range map[string]func(*enginetest.Fake){
		"start fails":       func(e *enginetest.Fake) { e.StartErr = errors.New("OCI runtime error: cannot start") },
		"servers never run": func(e *enginetest.Fake) { e.Silent = true },
	} {
		t.Run(name, func(t *testing.T) {
			w := newFakeWorld(t)
			w.m.SocketTimeout = 100 * time.Millisecond
			runtimeBefore, cardBefore := tree(t, w.m.Layout.Runtime), tree(t, w.r.CardPath)
			broken(w.e)
			_, err := w.up()
			t.Logf("up: %v", err)
			if err == nil {
				t.Fatal("up succeeded")
			}
			if w.e.Silent && !strings.Contains(err.Error(), "fake log of") {
				t.Errorf("the error does not carry the container's last output: %v", err)
			}
			if after := tree(t, w.m.Layout.Runtime); after != runtimeBefore {
				t.Errorf("the runtime directory changed:\nbefore:\n%s\nafter:\n%s", runtimeBefore, after)
			}
			if after := tree(t, w.r.CardPath); after != cardBefore {
				t.Errorf("the card changed:\nbefore:\n%s\nafter:\n%s", cardBefore, after)
			}
			if list := w.containers(); len(list) != 0 {
				t.Errorf("containers left: %+v", list)
			}
			if recs, _ := w.m.Registry.List(context.Background()); len(recs) != 0 {
				t.Errorf("records left: %+v", recs)
			}
		})
	}
}

// A container the engine half started before it was killed cannot start
// again; up removes it and makes it once more, and only once.
func TestFakeHalfStartedContainerIsMadeAgain(t *testing.T) {
	half := fmt.Errorf("start container: %w: runc create failed: container with given ID already exists", engine.ErrHalfStarted)
	w := newFakeWorld(t)
	w.e.StartErrOnce = half
	if _, err := w.up(); err != nil {
		t.Fatalf("up after a half start: %v", err)
	}
	if w.e.Creates != 2 {
		t.Errorf("%d creates, want 2", w.e.Creates)
	}
	if list := w.containers(); len(list) != 1 {
		t.Errorf("containers: %+v, want one", list)
	}

	// Control: an engine that half starts every container fails the up
	// after the second try, with nothing left.
	w = newFakeWorld(t)
	w.e.StartErr = half
	if _, err := w.up(); !errors.Is(err, engine.ErrHalfStarted) {
		t.Fatalf("up: %v, want the half start", err)
	}
	if w.e.Creates != 2 {
		t.Errorf("%d creates, want 2", w.e.Creates)
	}
	if list := w.containers(); len(list) != 0 {
		t.Errorf("containers left: %+v", list)
	}
}

// up returns once the container's init has opened tmux's socket to the
// group, not as soon as both servers answer: until then the student's
// entry in the socket's ACL is masked off. The control: the same up with
// an init that opens it succeeds.
func TestFakeUpWaitsForTheOpenedTmuxSocket(t *testing.T) {
	for _, private := range []bool{false, true} {
		t.Run(map[bool]string{false: "control", true: "never opened"}[private], func(t *testing.T) {
			w := newFakeWorld(t)
			// The never-opened case waits all of it: long enough that the
			// fake servers answer on a loaded machine, so that what is
			// missing at the end is the opened socket alone.
			w.m.SocketTimeout = 5 * time.Second
			w.e.TmuxPrivate = private
			_, err := w.up()
			if !private {
				if err != nil {
					t.Fatalf("up: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "has not opened") {
				t.Fatalf("up with tmux's socket still 0600: %v", err)
			}
		})
	}
}
