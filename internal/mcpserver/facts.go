package mcpserver

import (
	"context"
	"sync"

	"github.com/stem-edu/stem/internal/agentpolicy"
)

// callFacts are what one request is decided by: the verified connection
// and the agent policy in force for its instance. mcp-go runs the tool
// filter before the handler, and the handler picks the definition, asks
// for approval and runs the tool; each used to verify the target and read
// the registry, stem.toml and the consent file again. Read once per
// request instead, the filter and the pick also decide on the same facts.
// A fact is never kept beyond its request: the next one reads again.
type callFacts struct {
	mu     sync.Mutex
	c      *conn
	pol    agentpolicy.Policy
	hasPol bool
}

type factsKey struct{}

// withCallFacts gives ctx a fresh set of facts for one request, unless it
// already has one.
func withCallFacts(ctx context.Context) context.Context {
	if factsOf(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, factsKey{}, &callFacts{})
}

// factsOf is ctx's request facts, or nil (every method takes nil: nothing
// is kept).
func factsOf(ctx context.Context) *callFacts {
	f, _ := ctx.Value(factsKey{}).(*callFacts)
	return f
}

// conn is the request's verified connection, if it has one still alive.
func (f *callFacts) conn() *conn {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	c := f.c
	f.mu.Unlock()
	if c == nil || !c.alive() {
		return nil
	}
	return c
}

// setConn records the request's connection, verified just now; the policy
// is read again (a full verification may have brought a new record).
func (f *callFacts) setConn(c *conn) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.c, f.hasPol = c, false
}

// policy is the policy recorded for c in this request.
func (f *callFacts) policy(c *conn) (agentpolicy.Policy, bool) {
	if f == nil {
		return agentpolicy.Policy{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hasPol || f.c != c {
		return agentpolicy.Policy{}, false
	}
	return f.pol, true
}

func (f *callFacts) setPolicy(c *conn, p agentpolicy.Policy) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.c == c {
		f.pol, f.hasPol = p, true
	}
}

// callPolicy is policyFor(c), read once per request.
func (s *Server) callPolicy(ctx context.Context, c *conn) agentpolicy.Policy {
	f := factsOf(ctx)
	if p, ok := f.policy(c); ok {
		return p
	}
	p := s.policyFor(c)
	f.setPolicy(c, p)
	return p
}
