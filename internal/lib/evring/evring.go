// Package evring keeps the newest events of a stream for readers that ask
// for what came after a sequence number, and lets them wait for more. The
// MCP server keeps one ring of its session's events; the teacher's class
// hub keeps one per student, each a fair share of the class's memory (the
// share is the hub's policy; the ring only keeps to the bound it is given).
package evring

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Ring is events in increasing seq order, oldest first. It is not safe for
// concurrent use: its owner locks it.
type Ring[T any] struct {
	seqs    []int64
	items   []T
	dropped int64
}

// Add keeps v (whose seq is larger than any kept), dropping the oldest past
// max.
func (r *Ring[T]) Add(seq int64, v T, max int) {
	r.seqs, r.items = append(r.seqs, seq), append(r.items, v)
	if n := len(r.items) - max; n > 0 {
		// Copy down rather than reslice, so the arrays do not grow without
		// bound behind a sliding window.
		r.seqs = r.seqs[:copy(r.seqs, r.seqs[n:])]
		var zero T
		m := copy(r.items, r.items[n:])
		for i := m; i < len(r.items); i++ {
			r.items[i] = zero
		}
		r.items = r.items[:m]
		r.dropped += int64(n)
	}
}

// After returns a copy of the kept events whose seq is larger than seq,
// oldest first (nil when there are none).
func (r *Ring[T]) After(seq int64) []T {
	i := sort.Search(len(r.seqs), func(i int) bool { return r.seqs[i] > seq })
	if i == len(r.items) {
		return nil
	}
	return append([]T(nil), r.items[i:]...)
}

// Dropped counts the events Add has let go.
func (r *Ring[T]) Dropped() int64 { return r.dropped }

// Signal tells waiters that something changed. The zero Signal is ready.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns a channel that is closed at the next Broadcast.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Broadcast wakes everyone waiting on a channel C returned.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Wait calls poll until it reports ok, wait has passed or ctx ends, and
// returns its last result; between calls it waits for sig. Whatever
// changed after a call returned wakes the next wait, so nothing published
// is missed: make the change first, then Broadcast.
func Wait[T any](ctx context.Context, sig *Signal, wait time.Duration, poll func() (T, bool)) T {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := sig.C()
		v, ok := poll()
		if ok || wait <= 0 {
			return v
		}
		select {
		case <-changed:
		case <-deadline.C:
			return v
		case <-ctx.Done():
			return v
		}
	}
}
