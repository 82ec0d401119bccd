//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/specgen"
)

// A service killed or restarted under a command. An engine that starts
// its service (Options.StartService) starts it again, as Connect does when
// none answers. Then a call the service cannot have half done, or that
// changes nothing when done twice, is tried once more: look-ups, Start,
// Stop, a forced Remove, an exec session not yet started. Create first
// removes what a create that reached the dying service left under its
// name. Other calls fail with an error that says the service was started
// again and the command can be run again, never with "start the service".
// A call the service dies holding (a Stop it waits out, say) ends the
// same way: the bindings send it again, up to three times, and the dial
// is refused.

// restarted reports whether err says the service is gone (a dial of its
// socket refused, or the socket removed) and, for an engine that starts
// its service, whether it was started again.
func (e *Engine) restarted(ctx context.Context, err error) bool {
	path, ok := unixPath(e.uri)
	if !ok || !e.opts.StartService || !serviceGone(err) || ctx.Err() != nil {
		return false
	}
	_, serr := startService(ctx, e.opts, path)
	return serr == nil
}

// serviceGone: err is a failed dial of the service's socket.
func serviceGone(err error) bool {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// explain is deferred by every Engine method: errors reach callers with
// what to do about them, and a service that went away during the call is
// started again and said to have been.
func (e *Engine) explain(ctx context.Context, err *error) {
	var he *HintError
	if *err != nil && !errors.As(*err, &he) && serviceGone(*err) && e.opts.StartService {
		*err = e.lost(ctx, *err, "the call")
		return
	}
	*err = ExplainError(*err)
}

// lost starts the service again after it went away during what, and
// says so: what can be run again. A cancelled ctx (Ctrl-C) starts nothing.
func (e *Engine) lost(ctx context.Context, err error, what string) error {
	path, ok := unixPath(e.uri)
	if !ok || ctx.Err() != nil {
		return ExplainError(err)
	}
	msg := fmt.Sprintf("the Podman service at %s stopped during %s (it was killed or restarted)", e.uri, what)
	if _, serr := startService(ctx, e.opts, path); serr != nil {
		return &HintError{Err: err, Hint: msg + ", and stem could not start it again: " + serr.Error()}
	}
	return &HintError{Err: err, Hint: msg + "; stem started it again: run the command again"}
}

// dropPartial removes what a create that reached a dying service may have
// left: a container of the spec's name and labels that never ran, or only
// its storage (the service died before it recorded the container). A
// container of that name that is not the spec's is left alone, and is
// the error.
func (e *Engine) dropPartial(ctx context.Context, s *specgen.SpecGenerator) error {
	d, err := containers.Inspect(ctx, s.Name, nil)
	switch {
	case apiCode(err) == http.StatusNotFound || err != nil && strings.Contains(err.Error(), "no such container"):
		return e.dropStorage(ctx, s.Name)
	case err != nil:
		return fmt.Errorf("look for a container half made by the create: %w", err)
	}
	var labels map[string]string
	if d.Config != nil {
		labels = d.Config.Labels
	}
	ran := d.State == nil || d.State.Running || !d.State.StartedAt.IsZero()
	if !hasLabels(labels, s.Labels) || ran {
		return fmt.Errorf("container %s (%.12s) exists and is not the one this command was making: remove it (podman rm %s) if it is not needed", s.Name, d.ID, s.Name)
	}
	if _, err := containers.Remove(ctx, d.ID, new(containers.RemoveOptions).WithForce(true)); err != nil {
		return fmt.Errorf("remove container %s, half made by the create: %w", s.Name, err)
	}
	return nil
}

// dropStorage removes the storage of a container the service never
// recorded, which holds its name. The API has no call for it, so the
// podman CLI does it on the service's store (a local service: Connect
// started it with this environment); podman refuses a name that is a
// whole container. No such storage is not an error.
func (e *Engine) dropStorage(ctx context.Context, name string) error {
	podman := e.opts.Podman
	if podman == "" {
		podman = "podman"
	}
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, podman, "rm", "--storage", name)
	cmd.Env = withoutEnv(os.Environ(), "CONTAINER_HOST", "CONTAINER_CONNECTION")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "no such container") {
		return fmt.Errorf("remove the storage the create left under %s (podman rm --storage %s): %v: %s", name, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
