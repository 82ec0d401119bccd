package inspect

import (
	"context"
	"maps"
	"sync"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/lib/procstat"
)

// Cached answers for a running container from memory while the
// container's first process is the one Podman named at its last answer:
// the same pid with the same start time (a few microseconds from /proc).
// Podman takes about 2 ms per inspect here (it asks the OCI runtime), and
// stem-mcp verifies before every effectful call. A container stopped,
// restarted or removed has another first process, or none, so the next
// call asks Podman again; labels and ids cannot change while it runs. What
// this cannot see: a paused container (its process stays), and a pid
// reused by another process in the microseconds between Podman's answer
// and the read of its start time.
type Cached struct {
	Inner interface {
		Inspect(ctx context.Context, id string) (engine.Container, error)
	}
	mu   sync.Mutex
	seen map[string]seenContainer
}

type seenContainer struct {
	c     engine.Container
	start uint64
}

// NewCached wraps inner.
func NewCached(inner *Inspector) *Cached { return &Cached{Inner: inner} }

// Inspect implements verify.Inspector.
func (c *Cached) Inspect(ctx context.Context, id string) (engine.Container, error) {
	c.mu.Lock()
	s, ok := c.seen[id]
	c.mu.Unlock()
	if ok && procstat.Same(s.c.Pid, s.start) {
		ctr := s.c
		ctr.Labels = maps.Clone(s.c.Labels)
		return ctr, nil
	}
	ctr, err := c.Inner.Inspect(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, id)
	if err != nil || !ctr.Running || ctr.Pid <= 0 || ctr.ID != id {
		return ctr, err
	}
	if start, serr := procstat.Start(ctr.Pid); serr == nil {
		if c.seen == nil {
			c.seen = map[string]seenContainer{}
		}
		s := seenContainer{c: ctr, start: start}
		s.c.Labels = maps.Clone(ctr.Labels)
		c.seen[id] = s
	}
	return ctr, nil
}
