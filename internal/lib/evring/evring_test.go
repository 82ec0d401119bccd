package evring

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestRingKeepsTheNewest(t *testing.T) {
	var r Ring[string]
	if got := r.After(0); got != nil {
		t.Fatalf("empty ring: %v", got)
	}
	for i, s := range []string{"a", "b", "c", "d", "e"} {
		r.Add(int64(i+1)*10, s, 3)
	}
	if got := r.After(0); !slices.Equal(got, []string{"c", "d", "e"}) || r.Dropped() != 2 {
		t.Fatalf("after 5 adds at bound 3: %v, dropped %d", got, r.Dropped())
	}
	for seq, want := range map[int64][]string{25: {"c", "d", "e"}, 30: {"d", "e"}, 49: {"e"}, 50: nil} {
		if got := r.After(seq); !slices.Equal(got, want) {
			t.Errorf("After(%d) = %v, want %v", seq, got, want)
		}
	}
	// After's result is the caller's.
	got := r.After(0)
	got[0] = "x"
	if r.After(0)[0] != "c" {
		t.Fatal("After shares the ring's array")
	}
	// A smaller bound (a class that grew) drops more at once.
	r.Add(60, "f", 1)
	if got := r.After(0); !slices.Equal(got, []string{"f"}) || r.Dropped() != 5 {
		t.Fatalf("bound 1: %v, dropped %d", got, r.Dropped())
	}
}

// state is what a publisher changes and Wait's poll reads.
type state struct {
	mu  sync.Mutex
	n   int
	sig Signal
}

func (s *state) publish() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	s.sig.Broadcast()
}

func (s *state) poll(min int) func() (int, bool) {
	return func() (int, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.n, s.n >= min
	}
}

func TestWaitWakesOnBroadcast(t *testing.T) {
	var s state
	done := make(chan int)
	polled := make(chan struct{}, 1)
	go func() {
		done <- Wait(context.Background(), &s.sig, 10*time.Minute, func() (int, bool) {
			n, ok := s.poll(1)()
			select {
			case polled <- struct{}{}:
			default:
			}
			return n, ok
		})
	}()
	<-polled // the waiter has looked and found nothing
	s.publish()
	if n := <-done; n != 1 {
		t.Fatalf("Wait returned %d", n)
	}
}

// A change made after poll looked, before Wait blocks, still wakes it.
func TestWaitMissesNothing(t *testing.T) {
	var s state
	first := true
	got := Wait(context.Background(), &s.sig, 10*time.Minute, func() (int, bool) {
		n, ok := s.poll(1)()
		if first {
			first = false
			s.publish()
		}
		return n, ok
	})
	if got != 1 {
		t.Fatalf("Wait returned %d: it slept through a change", got)
	}
}

func TestWaitEnds(t *testing.T) {
	var s state
	if n := Wait(context.Background(), &s.sig, 0, s.poll(1)); n != 0 {
		t.Fatalf("wait 0: %d", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n := Wait(ctx, &s.sig, 10*time.Minute, s.poll(1)); n != 0 {
		t.Fatalf("cancelled: %d", n)
	}
	if n := Wait(context.Background(), &s.sig, time.Millisecond, s.poll(1)); n != 0 {
		t.Fatalf("deadline: %d", n)
	}
}

// Control for TestWaitMissesNothing: a wait that takes the signal's
// channel after polling sleeps through that change until its deadline.
func TestWaitMissesNothingControl(t *testing.T) {
	var s state
	first := true
	poll := func() (int, bool) {
		n, ok := s.poll(1)()
		if first {
			first = false
			s.publish()
		}
		return n, ok
	}
	n, ok := poll()
	if !ok {
		// Taken too late: the broadcast has passed, so this channel would
		// stay open until the deadline.
		select {
		case <-s.sig.C():
			t.Fatal("the late channel was closed")
		default:
		}
	}
	if n != 0 || ok {
		t.Fatalf("control: %d %v", n, ok)
	}
}
