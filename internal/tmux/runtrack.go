package tmux

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runState is what the tracker learned from the pane's output.
type runState struct {
	probed     bool
	probeLen   int
	keymap     string
	probeFixed bool // the probe repaired the hooks
	prompts    int  // primary prompts (133;A) seen
	armed      bool // the command has been typed
	started    bool // C seen
	finished   bool // D seen after arming
	ps2        bool
	status     int
	// strayKey: a probe answer came with a key the pane did not list when
	// Run read its keys; Run re-reads them (setKeys).
	strayKey string
	// oldIntegration: a probe answer without a key came back.
	oldIntegration bool
	out            []byte
	truncated      bool
}

// runTracker follows one pane's output for Run. feed runs on the reader
// goroutine and never blocks.
type runTracker struct {
	mu   sync.Mutex
	sc   oscScanner
	st   runState
	keys markKeys // marks with other keys are program output
	// strayBody is the probe answer whose key (st.strayKey) is not listed.
	strayBody string
	max       int
	poked     bool
	wake      chan struct{}
	lastOut   time.Time // the pane's latest output
}

// settle waits until the pane has been quiet for quiet (at most max).
func (t *runTracker) settle(ctx context.Context, quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	for {
		t.mu.Lock()
		wait := quiet - time.Since(t.lastOut)
		t.mu.Unlock()
		if wait <= 0 || time.Now().Add(wait).After(deadline) {
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

func newRunTracker(max int, keys markKeys) *runTracker {
	return &runTracker{max: max, keys: keys, wake: make(chan struct{}, 1)}
}

func (t *runTracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *runTracker) poke() {
	t.mu.Lock()
	t.poked = true
	t.mu.Unlock()
	t.signal()
}

func (t *runTracker) takePoke() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.poked
	t.poked = false
	return p
}

func (t *runTracker) resetProbe() {
	t.mu.Lock()
	t.st.probed, t.st.probeLen, t.st.keymap, t.st.probeFixed = false, 0, "", false
	t.st.strayKey, t.strayBody = "", ""
	t.mu.Unlock()
}

// setKeys replaces the pane's keys and applies a kept probe answer if its
// key is now listed; an answer whose key is still unknown is dropped.
func (t *runTracker) setKeys(keys markKeys) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keys = keys
	key, body := t.st.strayKey, t.strayBody
	t.st.strayKey, t.strayBody = "", ""
	if key != "" && keys[key] {
		t.mark("133;" + body + ";" + key)
	}
}

func (t *runTracker) arm() {
	t.mu.Lock()
	t.st.armed = true
	t.mu.Unlock()
}

func (t *runTracker) snapshot() runState {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.st
	s.out = bytes.Clone(t.st.out)
	return s
}

func (t *runTracker) feed(data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastOut = time.Now()
	changed := false
	for _, b := range data {
		if t.st.started && !t.st.finished {
			t.appendOut(b)
		}
		payload, ok := t.sc.step(b)
		if !ok {
			continue
		}
		changed = t.mark(payload) || changed
	}
	if changed {
		t.signal()
	}
}

// appendOut keeps the last max bytes of output.
func (t *runTracker) appendOut(b byte) {
	t.st.out = append(t.st.out, b)
	if len(t.st.out) > 2*t.max {
		cut := len(t.st.out) - t.max
		// Start after a line break, so no escape sequence is cut in half.
		if i := bytes.IndexByte(t.st.out[cut:], '\n'); i >= 0 && i < t.max/2 {
			cut += i + 1
		}
		t.st.out = append(t.st.out[:0], t.st.out[cut:]...)
		t.st.truncated = true
	}
}

// mark applies one OSC 133 payload; it reports whether the state changed.
// A mark without a key of the pane's shells is program output: ignored,
// except that a probe answer with a well-formed key not listed yet (a
// shell that started after the keys were read) is kept for setKeys.
func (t *runTracker) mark(p string) bool {
	rest, key, ok := splitMark(p)
	if !ok {
		return false
	}
	if !t.keys[key] {
		if !strings.HasPrefix(rest, "stem-probe;") || t.st.probed {
			return false
		}
		if !markKeyRE.MatchString(key) {
			// "stem-probe;N;MAP;FIXED" without a key: an integration
			// from before marks had keys.
			t.st.oldIntegration = true
			return false
		}
		t.st.strayKey, t.strayBody = key, rest
		return true
	}
	switch {
	case strings.HasPrefix(rest, "stem-probe;"):
		if t.st.probed {
			return false
		}
		fields := strings.Split(rest, ";")
		if len(fields) < 2 {
			return false
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil {
			return false
		}
		t.st.probed, t.st.probeLen = true, n
		if len(fields) > 2 {
			t.st.keymap = fields[2]
		}
		t.st.probeFixed = len(fields) > 3 && fields[3] == "1"
		return true
	case rest == "A":
		t.st.prompts++
		return true
	case !t.st.armed:
		return false
	case rest == "C":
		if t.st.started {
			return false
		}
		t.st.started = true
		return true
	case strings.HasPrefix(rest, "D"):
		if t.st.finished {
			return false
		}
		if !t.st.started && !t.st.ps2 {
			// D without C: bash read the line but PS0 did not run (someone
			// cleared it after the probe). Nothing to collect.
			t.st.started = true
		}
		if !t.st.started {
			return false
		}
		t.st.finished = true
		t.st.status = -1
		if code, ok := strings.CutPrefix(rest, "D;"); ok {
			if n, err := strconv.Atoi(code); err == nil {
				t.st.status = n
			}
		}
		// Drop the partial mark that was collected as output.
		if i := bytes.LastIndex(t.st.out, []byte("\x1b]133;D")); i >= 0 {
			t.st.out = t.st.out[:i]
		}
		return true
	case rest == "A;k=s":
		if t.st.started {
			return false
		}
		t.st.ps2 = true
		return true
	}
	return false
}

// oscScanner finds OSC strings in a byte stream that arrives in pieces.
type oscScanner struct {
	state int // 0 ground, 1 after ESC, 2 in OSC, 3 ESC inside OSC
	buf   []byte
	over  bool
}

const maxOSC = 256

// step consumes one byte and returns an OSC payload when one ends.
func (s *oscScanner) step(b byte) (string, bool) {
	switch s.state {
	case 0:
		if b == 0x1b {
			s.state = 1
		}
	case 1:
		switch b {
		case ']':
			s.state, s.buf, s.over = 2, s.buf[:0], false
		case 0x1b:
		default:
			s.state = 0
		}
	case 2:
		switch b {
		case 0x07:
			s.state = 0
			return s.done()
		case 0x1b:
			s.state = 3
		case 0x18, 0x1a:
			s.state = 0
		default:
			if len(s.buf) < maxOSC {
				s.buf = append(s.buf, b)
			} else {
				s.over = true
			}
		}
	case 3:
		if b == '\\' {
			s.state = 0
			return s.done()
		}
		// ESC that is not ST aborts the string and may start a new one.
		s.state = 1
		return s.step(b)
	}
	return "", false
}

func (s *oscScanner) done() (string, bool) {
	if s.over {
		return "", false
	}
	return string(s.buf), true
}
