//go:build !(remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper)

package podman

// Without the build tags the Podman bindings need (their dependencies
// want C libraries otherwise), the package builds without them: plain
// `go build ./...`, `go vet ./...` and editors work, and a binary built
// so says what to do instead of failing to compile. The Makefile sets the
// tags (Tags); so does .vscode/settings.json for gopls.

import (
	"context"
	"errors"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// Tags are the build tags of the real engine, as the Makefile sets them.
const Tags = "remote,exclude_graphdriver_btrfs,btrfs_noversion,exclude_graphdriver_devicemapper,containers_image_openpgp"

// ErrNoBindings is what Connect returns in a binary built without Tags.
var ErrNoBindings = errors.New("this binary was built without the Podman bindings (the build tags " + Tags + "): build it with `make build`")

// Engine is never made in this build: Connect fails.
type Engine struct{}

var _ engine.Engine = (*Engine)(nil)

// Connect fails with ErrNoBindings.
func Connect(context.Context, Options) (*Engine, error) { return nil, ErrNoBindings }

func (e *Engine) URI() string       { return "" }
func (e *Engine) Service() *Service { return nil }
func (e *Engine) Ping(context.Context) (string, error) {
	return "", ErrNoBindings
}
func (e *Engine) ImageInspect(context.Context, string) (engine.Image, error) {
	return engine.Image{}, ErrNoBindings
}
func (e *Engine) Create(context.Context, engine.Spec) (string, error) { return "", ErrNoBindings }
func (e *Engine) Start(context.Context, string) error                 { return ErrNoBindings }
func (e *Engine) Rename(context.Context, string, string) error        { return ErrNoBindings }
func (e *Engine) Inspect(context.Context, string) (engine.Container, error) {
	return engine.Container{}, ErrNoBindings
}
func (e *Engine) List(context.Context, map[string]string) ([]engine.Container, error) {
	return nil, ErrNoBindings
}
func (e *Engine) Stop(context.Context, string, time.Duration) error { return ErrNoBindings }
func (e *Engine) Remove(context.Context, string, bool) error        { return ErrNoBindings }
func (e *Engine) Exec(context.Context, string, engine.ExecSpec) (int, error) {
	return -1, ErrNoBindings
}
func (e *Engine) MemoryBytes(context.Context, string) (uint64, error) { return 0, ErrNoBindings }
func (e *Engine) LogTail(context.Context, string, int) (string, error) {
	return "", ErrNoBindings
}
