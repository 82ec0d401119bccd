package instance_test

// A re-creation that fails must leave the instance as it was, and a first
// start that fails must leave nothing. The failure is a real one from the
// OCI runtime: a private Podman service (same storage, so it sees the same
// containers) whose containers.conf sets a nofile limit above fs.nr_open,
// which runc cannot set. Containers created through it do not start;
// containers created earlier keep the limits they were created with and
// start through it as before.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/podman"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/lib/posixacl"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/selection"
)

// brokenEngine connects to a private service whose new containers fail to
// start with an rlimit error; it is stopped at cleanup.
func brokenEngine(t *testing.T) engine.Engine {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	nrOpen, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/tmp", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=4096:4096\"]\n[engine]\nruntime = \"runc\"\n", nrOpen+1, nrOpen+1)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	saved, had := os.LookupEnv("CONTAINERS_CONF")
	os.Setenv("CONTAINERS_CONF", conf) // the service inherits it
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := podman.Connect(ctx, podman.Options{URI: "unix://" + filepath.Join(dir, "p.sock"), StartService: true, LogDir: dir})
	if had {
		os.Setenv("CONTAINERS_CONF", saved)
	} else {
		os.Unsetenv("CONTAINERS_CONF")
	}
	if err != nil {
		t.Fatalf("start a private Podman service: %v", err)
	}
	if s := e.Service(); s != nil {
		t.Cleanup(func() { syscall.Kill(s.PID, syscall.SIGTERM) })
	}
	return e
}

// tree lists every path under root with its kind, mode, size and content
// digest (sockets and directories by mode only), so any change shows.
// groupMode is m with the owning group's own permission where an ACL
// makes the mode's group bits its mask: the container's ACL entry (stem
// grants it the card on every up) is not a change the tree reports.
func groupMode(p string, m fs.FileMode) fs.FileMode {
	acl, err := posixacl.GetPath(p)
	if err != nil || acl == nil {
		return m
	}
	if g, ok := acl.Find(posixacl.GroupObj, 0); ok {
		m = m&^0o070 | fs.FileMode(g.Perm)<<3
	}
	return m
}

func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := fmt.Sprintf("%s %v", rel, groupMode(p, fi.Mode()))
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			e += " -> " + to
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e += fmt.Sprintf(" %d %x", len(data), sha256.Sum256(data))
		}
		lines = append(lines, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// instanceContainers lists the containers carrying the instance's labels.
func (w *world) instanceContainers(name string) []engine.Container {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := w.m.Engine.List(ctx, map[string]string{labels.Instance: name, labels.Workspace: w.ws.Root})
	if err != nil {
		w.t.Fatal(err)
	}
	return list
}

func TestFailedRecreateKeepsTheOldInstance(t *testing.T) {
	w := newWorld(t)
	good := w.m.Engine
	t.Cleanup(func() { w.m.Engine = good }) // before newWorld's cleanup
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	if err := selection.Select(w.m.Layout, rec.Dir()); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(r.CardPath, ".stem", "instances", rec.Instance, "instance.json")
	cardBefore, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	runtimeBefore := tree(t, w.m.Layout.Runtime)
	recBefore, err := w.m.Registry.Get(ctx, rec.Instance)
	if err != nil {
		t.Fatal(err)
	}

	// stem-mcp is rebuilt (the configuration changes) and the service now
	// cannot start a new container.
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755)
	w.m.Engine = brokenEngine(t)
	uctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	_, err = w.m.Up(uctx, r, instance.UpOptions{})
	t.Logf("up: %v", err)
	if err == nil {
		t.Fatal("up through a service that cannot start containers succeeded")
	}
	for _, want := range []string{"re-creating " + rec.Instance + " failed", "old container " + rec.ContainerID[:12] + " was kept and started again", "default_ulimits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	w.m.Engine = good

	// The old container runs, answers on its sockets and verifies.
	if c, err := good.Inspect(ctx, rec.ContainerID); err != nil || !c.Running {
		t.Fatalf("the old container: %+v %v", c, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := probe.Tmux(pctx, rec.Dir().Tmux()); err != nil {
		t.Errorf("old tmux: %v", err)
	}
	if err := probe.Nvim(pctx, rec.Dir().Nvim()); err != nil {
		t.Errorf("old nvim: %v", err)
	}
	if _, err := w.checker().Instance(ctx, rec.Instance); err != nil {
		t.Errorf("the kept instance does not verify: %v", err)
	}
	if got, err := w.m.Registry.Get(ctx, rec.Instance); err != nil || asJSON(got) != asJSON(recBefore) {
		t.Errorf("the record changed:\n got %s %v\nwant %s", asJSON(got), err, asJSON(recBefore))
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
	if list := w.instanceContainers(rec.Instance); len(list) != 1 || list[0].ID != rec.ContainerID {
		t.Errorf("containers of the instance: %+v, want only %.12s", list, rec.ContainerID)
	}

	// With a working service the re-creation goes through: new id, the
	// usual container name, the old container and directory gone.
	res := w.up(r)
	if res.Action != instance.Recreated || res.Record.ContainerID == rec.ContainerID {
		t.Fatalf("up with a working service: %+v", res)
	}
	name := rec.Instance + "-" + rec.ThreadKey
	if c, err := good.Inspect(ctx, name); err != nil || c.ID != res.Record.ContainerID {
		t.Errorf("container %s is %.12s (%v), want the new %.12s", name, c.ID, err, res.Record.ContainerID)
	}
	if list := w.instanceContainers(rec.Instance); len(list) != 1 {
		t.Errorf("%d containers of the instance after the re-creation", len(list))
	}
	if _, err := os.Stat(rec.SocketDir); !os.IsNotExist(err) {
		t.Errorf("the old socket directory survived: %v", err)
	}
	if cur, _ := selection.Current(w.m.Layout); cur != res.Record.SocketDir {
		t.Errorf("the selection did not follow: %s", cur)
	}
}

// A stopped instance whose re-creation fails stays stopped and unchanged.
func TestFailedRecreateOfStoppedInstance(t *testing.T) {
	w := newWorld(t)
	good := w.m.Engine
	t.Cleanup(func() { w.m.Engine = good })
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	if _, err := w.m.Down(ctx, rec.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	runtimeBefore := tree(t, w.m.Layout.Runtime)
	recBefore, err := w.m.Registry.Get(ctx, rec.Instance)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755)
	w.m.Engine = brokenEngine(t)
	uctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	_, err = w.m.Up(uctx, r, instance.UpOptions{})
	t.Logf("up: %v", err)
	if err == nil || !strings.Contains(err.Error(), "was kept as it was") {
		t.Fatalf("up: %v", err)
	}
	w.m.Engine = good
	if c, err := good.Inspect(ctx, rec.ContainerID); err != nil || c.Running {
		t.Fatalf("the old container: %+v %v", c, err)
	}
	if after := tree(t, w.m.Layout.Runtime); after != runtimeBefore {
		t.Errorf("the runtime directory changed:\nbefore:\n%s\nafter:\n%s", runtimeBefore, after)
	}
	if got, _ := w.m.Registry.Get(ctx, rec.Instance); asJSON(got) != asJSON(recBefore) {
		t.Errorf("the record changed:\n got %s\nwant %s", asJSON(got), asJSON(recBefore))
	}
	if list := w.instanceContainers(rec.Instance); len(list) != 1 {
		t.Errorf("%d containers of the instance", len(list))
	}
}

// A first start that fails leaves no container, record, socket directory,
// runtime level or card state behind.
func TestFailedFirstCreateLeavesNothing(t *testing.T) {
	w := newWorld(t)
	good := w.m.Engine
	t.Cleanup(func() { w.m.Engine = good })
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	runtimeBefore, cardBefore := tree(t, w.m.Layout.Runtime), tree(t, r.CardPath)
	w.m.Engine = brokenEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, err := w.m.Up(ctx, r, instance.UpOptions{})
	t.Logf("up: %v", err)
	if err == nil || !strings.Contains(err.Error(), "default_ulimits") {
		t.Fatalf("up: %v", err)
	}
	w.m.Engine = good
	if after := tree(t, w.m.Layout.Runtime); after != runtimeBefore {
		t.Errorf("the runtime directory changed:\nbefore:\n%s\nafter:\n%s", runtimeBefore, after)
	}
	if after := tree(t, r.CardPath); after != cardBefore {
		t.Errorf("the card changed:\nbefore:\n%s\nafter:\n%s", cardBefore, after)
	}
	if list := w.instanceContainers("native-amd64-demo-hello-t1"); len(list) != 0 {
		t.Errorf("containers left: %+v", list)
	}
	if recs, _ := w.m.Registry.List(ctx); len(recs) != 0 {
		t.Errorf("records left: %+v", recs)
	}
}

// Reusing a healthy instance removes a predecessor's directory left beside
// its own, and nothing else: not a directory that is not named like one,
// not a symlink (nor what it points to).
func TestReuseRemovesStaleSiblings(t *testing.T) {
	w := newWorld(t)
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	inst := filepath.Dir(rec.SocketDir)
	stale := filepath.Join(inst, "0123456789ab")
	other := filepath.Join(inst, "notes")
	link := filepath.Join(inst, "abcdefabcdef")
	victim := t.TempDir()
	for _, d := range []string{stale, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(stale, "container.json"), []byte("{}"), 0o600)
	os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	res := w.up(r)
	if res.Action != instance.Reused || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up: %+v", res)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale directory survived reuse: %v", err)
	}
	if !reflect.DeepEqual(res.Removed, []string{stale}) {
		t.Errorf("removed %v, want [%s]", res.Removed, stale)
	}
	for _, p := range []string{other, link, filepath.Join(victim, "keep"), rec.SocketDir} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	os.Remove(link)
	os.Remove(other)
}
