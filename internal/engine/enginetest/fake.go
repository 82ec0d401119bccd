// Package enginetest is an in-memory engine.Engine for tests of stem's
// decisions (the instance Manager's create, reuse and re-create, and every
// stemctl command through its Factory) in milliseconds, without Podman.
// Its "containers" are what stem can observe of real ones: unique names,
// labels, states, and servers that listen on t.sock and n.sock in the
// container's socket directory while it runs (the directory must exist
// before Start, as a bind mount's source must). The real engine runs the
// same paths in the integration suites, which keep the fake faithful.
package enginetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/sockets"
)

// Fake is the in-memory engine; NewFake makes one.
type Fake struct {
	mu   sync.Mutex
	ctrs map[string]*fakeCtr // by id
	seq  int
	// StartErr, when set, is what Start returns for containers created
	// from then on (a broken image or OCI runtime); older ones start.
	StartErr error
	// StartErrOnce, when set, is what Start returns for the next container
	// created, and only for it.
	StartErrOnce error
	// Silent: containers created from then on start, but their servers
	// never listen.
	Silent bool
	// TmuxPrivate: containers created from then on leave tmux's socket as
	// tmux makes it (0600), as an init that never finishes setting it up.
	TmuxPrivate bool
	// Creates counts Create calls.
	Creates int
	// Seed, when set, goes into every container id, so that two Fakes'
	// containers differ as real ones always do.
	Seed string
	// ExecFunc, when set, answers Exec in a running container (what the
	// process would have returned); without it Exec is not supported.
	ExecFunc func(c engine.Container, spec engine.ExecSpec) (int, error)
}

type fakeCtr struct {
	c        engine.Container
	spec     engine.Spec
	startErr error
	silent   bool
	// tmuxPrivate: see Fake.TmuxPrivate.
	tmuxPrivate bool
	servers     []*net.UnixListener
}

// NewFake returns an engine with no containers.
func NewFake() *Fake { return &Fake{ctrs: map[string]*fakeCtr{}} }

var _ engine.Engine = (*Fake)(nil)

func (f *Fake) Ping(context.Context) (string, error) { return "fake", nil }

func (f *Fake) ImageInspect(_ context.Context, ref string) (engine.Image, error) {
	sum := sha256.Sum256([]byte(ref))
	return engine.Image{ID: hex.EncodeToString(sum[:]), Names: []string{ref}}, nil
}

func (f *Fake) Create(_ context.Context, spec engine.Spec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Creates++
	if spec.Image == "" {
		return "", errors.New("fake: no image")
	}
	if f.byName(spec.Name) != nil {
		return "", fmt.Errorf("fake: the container name %q is already in use", spec.Name)
	}
	for _, m := range spec.Mounts {
		if _, err := os.Stat(m.Source); err != nil {
			return "", fmt.Errorf("fake: bind source: %w", err)
		}
	}
	f.seq++
	sum := sha256.Sum256([]byte(f.Seed + "fake container " + strconv.Itoa(f.seq)))
	id := hex.EncodeToString(sum[:])
	lbl := map[string]string{}
	for k, v := range spec.Labels {
		lbl[k] = v
	}
	f.ctrs[id] = &fakeCtr{
		c:           engine.Container{ID: id, Name: spec.Name, Image: spec.Image, Labels: lbl, State: "created", Created: time.Now()},
		spec:        spec,
		startErr:    cmp.Or(f.StartErrOnce, f.StartErr),
		silent:      f.Silent,
		tmuxPrivate: f.TmuxPrivate,
	}
	f.StartErrOnce = nil
	return id, nil
}

// byName finds a container by name; f.mu is held.
func (f *Fake) byName(name string) *fakeCtr {
	for _, c := range f.ctrs {
		if c.c.Name == name {
			return c
		}
	}
	return nil
}

// find finds a container by full id or name; f.mu is held.
func (f *Fake) find(ref string) (*fakeCtr, error) {
	if c, ok := f.ctrs[ref]; ok {
		return c, nil
	}
	if c := f.byName(ref); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("fake: container %s: %w", ref, engine.ErrNotFound)
}

func (f *Fake) Start(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if c.c.Running {
		return nil
	}
	if c.startErr != nil {
		return c.startErr
	}
	dir := filepath.Join(c.spec.Env["STEM_INSTANCE_DIR"], id[:12])
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("fake: the container's socket directory %s does not exist: %v", dir, err)
	}
	if !c.silent {
		for _, s := range []string{sockets.TmuxSocket, sockets.NvimSocket} {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, s), Net: "unix"})
			if err != nil {
				c.stopServers()
				return fmt.Errorf("fake: %w", err)
			}
			// A stopped container's servers leave their sockets behind.
			l.SetUnlinkOnClose(false)
			c.servers = append(c.servers, l)
			// stem-init opens tmux's socket to the group once it is set up.
			if s == sockets.TmuxSocket && !c.tmuxPrivate {
				if err := os.Chmod(filepath.Join(dir, s), 0o660); err != nil {
					c.stopServers()
					return fmt.Errorf("fake: %w", err)
				}
			}
		}
	}
	// The container's first process is this one: the card's .git check
	// looks at /proc/PID/root, which is then the host's own root, where
	// the card's .git is the one recorded.
	c.c.Running, c.c.State, c.c.Pid = true, "running", os.Getpid()
	return nil
}

func (c *fakeCtr) stopServers() {
	for _, l := range c.servers {
		l.Close()
	}
	c.servers = nil
}

func (f *Fake) Inspect(_ context.Context, ref string) (engine.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(ref)
	if err != nil {
		return engine.Container{}, err
	}
	out := c.c
	out.Labels = map[string]string{}
	for k, v := range c.c.Labels {
		out.Labels[k] = v
	}
	return out, nil
}

func (f *Fake) List(_ context.Context, want map[string]string) ([]engine.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []engine.Container
next:
	for _, c := range f.ctrs {
		for k, v := range want {
			if c.c.Labels[k] != v {
				continue next
			}
		}
		out = append(out, c.c)
	}
	return out, nil
}

func (f *Fake) Stop(_ context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	c.stopServers()
	c.c.Running, c.c.State, c.c.Pid = false, "exited", 0
	return nil
}

func (f *Fake) Remove(_ context.Context, id string, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if c.c.Running && !force {
		return fmt.Errorf("fake: container %.12s is running", id)
	}
	c.stopServers()
	delete(f.ctrs, c.c.ID)
	return nil
}

func (f *Fake) Rename(_ context.Context, id, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if o := f.byName(name); o != nil && o != c {
		return fmt.Errorf("fake: the container name %q is already in use", name)
	}
	c.c.Name = name
	return nil
}

func (f *Fake) Exec(_ context.Context, id string, spec engine.ExecSpec) (int, error) {
	f.mu.Lock()
	c, err := f.find(id)
	var ctr engine.Container
	if err == nil {
		ctr = c.c
	}
	fn := f.ExecFunc
	f.mu.Unlock()
	switch {
	case err != nil:
		return -1, err
	case !ctr.Running:
		return -1, fmt.Errorf("fake: container %.12s is not running", id)
	case fn == nil:
		return -1, errors.New("fake: exec is not supported")
	}
	return fn(ctr, spec)
}

func (f *Fake) MemoryBytes(context.Context, string) (uint64, error) { return 0, nil }

func (f *Fake) LogTail(_ context.Context, id string, _ int) (string, error) {
	return "fake log of " + id[:12], nil
}

// Probe is a server probe for the fake's servers: something accepts
// connections on the socket (reached as stem reaches real ones, through
// unixpin).
func Probe(ctx context.Context, path string) error {
	c, err := unixpin.Dial(ctx, path)
	if err != nil {
		return err
	}
	return c.Close()
}
