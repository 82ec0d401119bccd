package supervisor

import (
	"context"
	"errors"
	"time"
)

// input passes the student's keys to the agent. Their time is noted
// first, so a line being typed (inject holds inMu) is not followed by
// another while the student types.
func (h *hub) input(p []byte) {
	if !onlyFocus(p) {
		h.mu.Lock()
		h.lastKey = time.Now()
		h.mu.Unlock()
	}
	h.inMu.Lock()
	defer h.inMu.Unlock()
	h.mu.Lock()
	f := h.term
	h.mu.Unlock()
	if f != nil {
		f.Write(p)
	}
}

// activity returns when keys last came from a window and when the agent
// last wrote output.
func (h *hub) activity() (lastKey, lastOutput time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastKey, h.lastOutput
}

// echoQuiet is how long the agent's output must stay quiet after a typed
// line before Enter goes in; echoMax bounds that wait.
const (
	echoQuiet = 150 * time.Millisecond
	echoMax   = 2 * time.Second
)

// enterRetries bounds the extra Enters inject sends when the CLI took the
// first for part of the typing (under load its paste detection can see a
// burst longer than echoQuiet).
const enterRetries = 2

// inject types line into the agent's input and sends it with Enter.
// The student's keys wait meanwhile (they are written after it), and
// nothing is typed when a key came in the last keyQuiet or idle (a fresh
// read of the screen) says the CLI is no longer at its empty prompt. held,
// asked once the output is quiet after Enter, says the input still holds
// the line (Enter was taken as typing): Enter is sent again.
func (h *hub) inject(ctx context.Context, line string, idle, held func() bool) error {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if lastKey, _ := h.activity(); time.Since(lastKey) < keyQuiet {
		return errors.New("the student is typing")
	}
	if !idle() {
		return errors.New("the CLI is no longer idle")
	}
	h.mu.Lock()
	t := h.term
	h.mu.Unlock()
	if t == nil {
		return errors.New("no terminal")
	}
	typed := time.Now()
	if _, err := t.Write([]byte(line)); err != nil {
		return err
	}
	// Enter only once the CLI has drawn the line and gone quiet: the CLIs
	// take an Enter that arrives within a burst of characters for part
	// of a paste (a new line in the input), not for "send".
	for try := 0; ; try++ {
		if err := h.waitEcho(ctx, typed); err != nil {
			return err
		}
		if try > 0 && (held == nil || !held()) {
			return nil
		}
		if try > enterRetries {
			return errors.New("the line stays in the CLI's input: Enter was not taken")
		}
		typed = time.Now()
		if _, err := t.Write([]byte("\r")); err != nil {
			return err
		}
	}
}

// waitEcho waits until the agent has written something since since and
// then been quiet for echoQuiet, or echoMax has passed.
func (h *hub) waitEcho(ctx context.Context, since time.Time) error {
	deadline := since.Add(echoMax)
	for {
		_, out := h.activity()
		now := time.Now()
		if (out.After(since) && now.Sub(out) >= echoQuiet) || now.After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// onlyFocus reports whether p is nothing but focus reports (ESC [ I and
// ESC [ O, which tmux sends a CLI that asked for them when the student
// enters or leaves its window): not keys of the student's.
func onlyFocus(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	for len(p) > 0 {
		if len(p) < 3 || p[0] != 0x1b || p[1] != '[' || (p[2] != 'I' && p[2] != 'O') {
			return false
		}
		p = p[3:]
	}
	return true
}
