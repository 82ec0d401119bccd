package class

import (
	"context"
	"fmt"
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
			} else if r, ok := h.cutOffRow(s); ok {
				rows[i] = r
				return
			}
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				rows[i] = h.probe(ctx, s)
			case <-ctx.Done():
				rows[i] = failed(s, failure{ReachTimeout, "not asked: " + ctx.Err().Error(), ""}, 0)
			}
		}()
	}
	wg.Wait()
	now := time.Now()
	for i := range rows {
		if rows[i].Reach != ReachOK {
			continue
		}
		h.mu.Lock()
		if w := h.work[rows[i].Student]; w != nil {
			rows[i].Work = w.at(now)
		}
		h.mu.Unlock()
		rows[i].Flags = triage(rows[i], now)
	}
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

// probeCall is one status probe of a student, shared by whoever asks
// while it runs.
type probeCall struct {
	done chan struct{}
	row  Row
}

// probe asks the student's gate for `status` over a new connection, or
// waits for the probe already under way: at start-up the hub connecting
// and a first Overview would otherwise make two SSH handshakes for each
// student at once.
func (h *Hub) probe(ctx context.Context, s Student) Row {
	h.mu.Lock()
	if c := h.probing[s.Name]; c != nil {
		h.mu.Unlock()
		select {
		case <-c.done:
			return c.row
		case <-ctx.Done():
			return failed(s, failure{ReachTimeout, "not asked: " + ctx.Err().Error(), ""}, 0)
		}
	}
	c := &probeCall{done: make(chan struct{})}
	h.probing[s.Name] = c
	h.mu.Unlock()
	c.row = probe(ctx, s, h.opt.Options)
	h.mu.Lock()
	delete(h.probing, s.Name)
	h.mu.Unlock()
	close(c.done)
	return c.row
}

// StatusOf is Overview's row for one student: over their open session
// when there is one, otherwise a new connection (shared with the hub's
// own probe), with the flags their events add.
func (h *Hub) StatusOf(ctx context.Context, student string) (Row, error) {
	var s *Student
	for i := range h.students {
		if h.students[i].Name == student {
			s = &h.students[i]
		}
	}
	if s == nil {
		return Row{}, fmt.Errorf("no student %q in this class", clean(student))
	}
	r, ok := h.cutOffRow(*s)
	if op := h.session(student); op != nil {
		r, ok = h.overSession(ctx, *s, op)
	}
	if !ok {
		r = h.probe(ctx, *s)
	}
	if r.Reach == ReachOK {
		now := time.Now()
		h.mu.Lock()
		if w := h.work[student]; w != nil {
			r.Work = w.at(now)
		}
		h.mu.Unlock()
		r.Flags = triage(r, now)
	}
	return r, nil
}

// Grant is what the student's open session allows: the grant's level and
// the tools its gate offers (sorted). ok is false without an open session.
func (h *Hub) Grant(student string) (level string, tools []string, ok bool) {
	op := h.session(student)
	if op == nil {
		return "", nil, false
	}
	return op.level, op.toolNames(), true
}

// cutOffRow is the row of a student whose last session the hub cut off
// for going past its budget, until the hub's next attempt: no new
// connection is spent on them meanwhile.
func (h *Hub) cutOffRow(s Student) (Row, bool) {
	h.mu.Lock()
	l := *h.links[s.Name]
	h.mu.Unlock()
	if !l.CutOff || l.Connected {
		return Row{}, false
	}
	fix := "the student's side sent what no stem-mcp gate sends: ask the student to run `stemctl access check`"
	if l.Retry != nil {
		fix += fmt.Sprintf("; the next attempt is at %s", l.Retry.UTC().Format(time.RFC3339))
	}
	return failed(s, failure{ReachBroken, l.Error, fix}, 0), true
}
