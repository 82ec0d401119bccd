package factory

import (
	"context"
	"fmt"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/podman"
)

// newEngine connects to the Podman API service, starting it for the user
// when nothing answers (it then keeps running, as `podman system service`
// does under systemd). The engine explains its own errors (what to do about
// an OCI runtime failure, a missing image).
func newEngine(ctx context.Context, f *cmdutil.Factory) (engine.Engine, error) {
	d, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	e, err := podman.Connect(ctx, podman.Options{StartService: true, LogDir: d.State, Getenv: f.Getenv})
	if err != nil {
		return nil, fmt.Errorf("connect to Podman: %w\n  run `stemctl doctor` to check everything this account needs", err)
	}
	return e, nil
}
