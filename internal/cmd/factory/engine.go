package factory

import (
	"context"
	"errors"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
)

// newEngine connects to Podman. Wired to internal/engine/podman once that
// package lands.
func newEngine(ctx context.Context, f *cmdutil.Factory) (engine.Engine, error) {
	return nil, errors.New("the Podman engine is not wired yet")
}
