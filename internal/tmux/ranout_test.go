package tmux

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// lateCtx is a context whose deadline has passed but whose timer has not
// fired yet: what a command's write deadline can see.
type lateCtx struct {
	context.Context
	dl time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.dl, true }

func TestRanOut(t *testing.T) {
	deadline := fmt.Errorf("tmux: sending capture-pane: %w", context.DeadlineExceeded)
	past := lateCtx{context.Background(), time.Now().Add(-time.Millisecond)}
	future := lateCtx{context.Background(), time.Now().Add(time.Hour)}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"deadline passed, ctx not told yet", past, deadline, true},
		{"ctx expired", expired, deadline, true},
		{"deadline still ahead", future, deadline, false},
		{"cancelled, not expired", cancelled, deadline, false},
		{"another error", past, errors.New("no such pane"), false},
		{"no error", past, nil, false},
		{"no deadline", context.Background(), deadline, false},
	} {
		if got := ranOut(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: ranOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}
