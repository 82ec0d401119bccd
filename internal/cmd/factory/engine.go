package factory

import (
	"context"
	"fmt"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/podman"
)

// newEngine connects to the Podman API service, starting it for the user
// when nothing answers (it then keeps running, as `podman system service`
// does under systemd).
func newEngine(ctx context.Context, f *cmdutil.Factory) (engine.Engine, error) {
	d, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	e, err := podman.Connect(ctx, podman.Options{StartService: true, LogDir: d.State, Getenv: f.Getenv})
	if err != nil {
		return nil, fmt.Errorf("connect to Podman: %w", podman.ExplainError(err))
	}
	return explaining{e}, nil
}

// explaining wraps every engine error with podman.ExplainError, so an OCI
// runtime failure reaches the user with what to do about it.
type explaining struct{ e *podman.Engine }

func (x explaining) Ping(ctx context.Context) (string, error) {
	v, err := x.e.Ping(ctx)
	return v, podman.ExplainError(err)
}
func (x explaining) ImageInspect(ctx context.Context, ref string) (engine.Image, error) {
	v, err := x.e.ImageInspect(ctx, ref)
	return v, podman.ExplainError(err)
}
func (x explaining) Create(ctx context.Context, s engine.Spec) (string, error) {
	v, err := x.e.Create(ctx, s)
	return v, podman.ExplainError(err)
}
func (x explaining) Start(ctx context.Context, id string) error {
	return podman.ExplainError(x.e.Start(ctx, id))
}
func (x explaining) Inspect(ctx context.Context, id string) (engine.Container, error) {
	v, err := x.e.Inspect(ctx, id)
	return v, podman.ExplainError(err)
}
func (x explaining) List(ctx context.Context, l map[string]string) ([]engine.Container, error) {
	v, err := x.e.List(ctx, l)
	return v, podman.ExplainError(err)
}
func (x explaining) Stop(ctx context.Context, id string, t time.Duration) error {
	return podman.ExplainError(x.e.Stop(ctx, id, t))
}
func (x explaining) Remove(ctx context.Context, id string, force bool) error {
	return podman.ExplainError(x.e.Remove(ctx, id, force))
}
func (x explaining) Exec(ctx context.Context, id string, s engine.ExecSpec) (int, error) {
	v, err := x.e.Exec(ctx, id, s)
	return v, podman.ExplainError(err)
}
func (x explaining) MemoryBytes(ctx context.Context, id string) (uint64, error) {
	v, err := x.e.MemoryBytes(ctx, id)
	return v, podman.ExplainError(err)
}
func (x explaining) LogTail(ctx context.Context, id string, n int) (string, error) {
	v, err := x.e.LogTail(ctx, id, n)
	return v, podman.ExplainError(err)
}

// Rename keeps the wrapper an engine.Renamer, so a re-created container
// gets its usual name back (instance.Manager checks for the interface).
func (x explaining) Rename(ctx context.Context, id, name string) error {
	return podman.ExplainError(x.e.Rename(ctx, id, name))
}

var _ engine.Renamer = explaining{}
