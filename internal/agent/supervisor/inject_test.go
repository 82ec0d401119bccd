package supervisor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoTerm is an agent's terminal that echoes: every write counts as the
// agent's output at once.
type echoTerm struct {
	h      *hub
	mu     sync.Mutex
	writes []string
}

func (e *echoTerm) Write(p []byte) (int, error) {
	e.mu.Lock()
	e.writes = append(e.writes, string(p))
	e.mu.Unlock()
	e.h.mu.Lock()
	e.h.lastOutput = time.Now()
	e.h.mu.Unlock()
	return len(p), nil
}

func (e *echoTerm) setSize(int, int) {}

func (e *echoTerm) enters() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.writes {
		n += strings.Count(w, "\r")
	}
	return n
}

// An Enter the CLI took for part of the typing (the line still in its
// input) is sent again, a bounded number of times; one that was taken is
// not repeated.
func TestInjectSendsEnterAgainWhileTheLineIsHeld(t *testing.T) {
	idle := func() bool { return true }
	for _, tc := range []struct {
		name   string
		held   int // how many checks find the line still in the input
		enters int
		fails  bool
	}{
		{"taken at once", 0, 1, false},
		{"taken at the second", 1, 2, false},
		{"never taken", 100, 1 + enterRetries, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hub{}
			term := &echoTerm{h: h}
			h.term = term
			checks := 0
			held := func() bool { checks++; return checks <= tc.held }
			err := h.inject(context.Background(), "[stem event] build failed", idle, held)
			if (err != nil) != tc.fails || term.enters() != tc.enters {
				t.Fatalf("err %v, %d Enters; want failure %v, %d Enters", err, term.enters(), tc.fails, tc.enters)
			}
		})
	}
}
