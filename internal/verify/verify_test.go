package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
)

// fakeEngine stands in for Podman here; the same checks run against real
// containers in internal/instance and internal/mcpserver.
type fakeEngine map[string]engine.Container

func (f fakeEngine) Inspect(_ context.Context, id string) (engine.Container, error) {
	c, ok := f[id]
	if !ok {
		return engine.Container{}, fmt.Errorf("container %s: %w", id, engine.ErrNotFound)
	}
	return c, nil
}

type world struct {
	c   *Checker
	eng fakeEngine
	rec registry.Record
}

func setup(t *testing.T) *world {
	rt, err := os.MkdirTemp("/tmp", "vf")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	t.Cleanup(func() { os.RemoveAll(rt) })
	l := sockets.Layout{Runtime: rt}
	reg, _ := registry.Open(t.TempDir())
	id := strings.Repeat("ab", 32)
	th, ik := sockets.ThreadKey("/ws"), sockets.InstanceKey("i1")
	dir, _ := l.ForContainer(th, ik, id)
	if err := l.Create(dir); err != nil {
		t.Fatal(err)
	}
	sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{ID: id, Instance: "i1"})
	rec := registry.Record{Instance: "i1", ContainerID: id, SocketDir: dir.Path, ThreadKey: th, InstanceKey: ik}
	reg.Put(context.Background(), rec)
	eng := fakeEngine{id: {ID: id, Running: true, State: "running", Labels: map[string]string{labels.Instance: "i1"}}}
	return &world{c: &Checker{Layout: l, Registry: reg, Inspector: eng}, eng: eng, rec: rec}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	var ve *Error
	if !errors.As(err, &ve) || ve.Check != want {
		t.Fatalf("want a %q failure, got %v", want, err)
	}
}

func TestInstanceChecks(t *testing.T) {
	ctx := context.Background()
	w := setup(t)
	if _, err := w.c.Instance(ctx, "i1"); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	_, err := w.c.Instance(ctx, "nope")
	check(t, err, "registry")

	// A record whose directory is not the one its keys and id give.
	bad := w.rec
	bad.SocketDir = filepath.Join(filepath.Dir(w.rec.SocketDir), "0123456789ab")
	_, err = w.c.Record(ctx, bad)
	check(t, err, "registry")

	// container.json naming another container.
	sockets.WriteJSON(w.rec.SocketDir, sockets.ContainerJSON, sockets.ContainerInfo{ID: strings.Repeat("cd", 32), Instance: "i1"})
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "container-json")
	sockets.WriteJSON(w.rec.SocketDir, sockets.ContainerJSON, sockets.ContainerInfo{ID: w.rec.ContainerID, Instance: "i1"})

	// The container carries another instance's label.
	c := w.eng[w.rec.ContainerID]
	c.Labels = map[string]string{labels.Instance: "other"}
	w.eng[w.rec.ContainerID] = c
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "label")

	// Stopped.
	c.Labels = map[string]string{labels.Instance: "i1"}
	c.Running, c.State = false, "exited"
	w.eng[w.rec.ContainerID] = c
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "container")

	// Removed behind stem's back: the message says how to fix it.
	delete(w.eng, w.rec.ContainerID)
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "container")
	if !strings.Contains(err.Error(), "stemctl up") {
		t.Fatalf("no remedy in %v", err)
	}

	// Probes run last and their failure is named.
	w.eng[w.rec.ContainerID] = engine.Container{ID: w.rec.ContainerID, Running: true, Labels: map[string]string{labels.Instance: "i1"}}
	w.c.Servers.Tmux = func(context.Context, string) error { return errors.New("no server") }
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "tmux")
}

func TestSelectedRefusesForeignDirectories(t *testing.T) {
	ctx := context.Background()
	w := setup(t)
	_, err := w.c.Selected(ctx)
	check(t, err, "selection")
	if !errors.Is(err, selection.ErrNone) {
		t.Fatalf("no selection: %v", err)
	}
	if err := selection.Select(w.c.Layout, w.rec.Dir()); err != nil {
		t.Fatal(err)
	}
	if tg, err := w.c.Selected(ctx); err != nil || tg.Record.Instance != "i1" {
		t.Fatalf("selected: %v", err)
	}
	// A link swapped to another directory inside the runtime root, with
	// sockets and a container.json copied from the real one, is refused:
	// it is no record's socket directory.
	fake := filepath.Join(w.c.Layout.Root(), "evil")
	os.Mkdir(fake, 0o700)
	sockets.WriteJSON(fake, sockets.ContainerJSON, sockets.ContainerInfo{ID: w.rec.ContainerID, Instance: "i1"})
	os.Remove(w.c.Layout.Selected())
	os.Symlink(fake, w.c.Layout.Selected())
	_, err = w.c.Selected(ctx)
	check(t, err, "selection")
	// A relative link to the right directory is resolved and accepted.
	os.Remove(w.c.Layout.Selected())
	rel, _ := filepath.Rel(filepath.Dir(w.c.Layout.Selected()), w.rec.SocketDir)
	os.Symlink(rel, w.c.Layout.Selected())
	if _, err := w.c.Selected(ctx); err != nil {
		t.Fatalf("relative link to the right directory: %v", err)
	}
}

// A Neovim that does not answer is reported, not a failed check: the
// instance is verified (tools that do not use the editor work), and every
// identity check still refuses as before.
func TestEditorDownIsReportedNotRefused(t *testing.T) {
	ctx := context.Background()
	w := setup(t)
	w.c.Servers.Tmux = func(context.Context, string) error { return nil }
	w.c.Servers.Nvim = func(context.Context, string) error { return errors.New("no nvim") }
	tg, err := w.c.Instance(ctx, "i1")
	if err != nil {
		t.Fatalf("with only Neovim down: %v", err)
	}
	if tg.Editor == nil || tg.Editor.Error() != "no nvim" {
		t.Fatalf("Target.Editor = %v, want the probe's error", tg.Editor)
	}
	c := w.eng[w.rec.ContainerID]
	c.Labels = map[string]string{labels.Instance: "other"}
	w.eng[w.rec.ContainerID] = c
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "label")
	c.Labels = map[string]string{labels.Instance: "i1"}
	w.eng[w.rec.ContainerID] = c
	w.c.Servers.Tmux = func(context.Context, string) error { return errors.New("no tmux") }
	_, err = w.c.Instance(ctx, "i1")
	check(t, err, "tmux")
}
