package class

import (
	"context"
	"sync"
	"time"
)

// session returns the student's open session, or nil.
func (h *Hub) session(student string) *openSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open[student]
}

// Overview is Status for the hub's students, served over the open
// sessions where there are any: a connected student's row comes from the
// gate's gate_status tool on that session (no new SSH connection); a
// student without one, or whose session fails to answer, is asked with a
// new connection as Status does. Rows keep the roster's order; each
// within the hub's per-student Timeout.
func (h *Hub) Overview(ctx context.Context) []Row {
	parallel := h.opt.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	rows := make([]Row, len(h.students))
	// Asking over an open session costs no process: only new connections
	// count against Parallel.
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, s := range h.students {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if op := h.session(s.Name); op != nil {
				if r, ok := h.overSession(ctx, s, op); ok {
					rows[i] = r
					return
				}
			}
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				rows[i] = probe(ctx, s, h.opt.Options)
			case <-ctx.Done():
				rows[i] = failed(s, failure{ReachTimeout, "not asked: " + ctx.Err().Error(), ""}, 0)
			}
		}()
	}
	wg.Wait()
	return rows
}

// overSession asks for the student's status on their open session; ok is
// false when the session did not answer (the caller connects anew).
func (h *Hub) overSession(ctx context.Context, s Student, op *openSession) (Row, bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opt.Timeout)
	defer cancel()
	st, err := op.sess.status(ctx)
	if err != nil {
		return Row{}, false
	}
	r := rowOf(s, st, time.Since(start), nil)
	r.Via = "session"
	return r, true
}
