package tmux

import (
	"bytes"
	"strings"
	"sync/atomic"

	"github.com/stem-edu/stem/internal/termtext"
)

// Notification is one asynchronous control-mode line (%output, %exit,
// %window-add, %sessions-changed, %pane-mode-changed, ...).
//
// Names in Args (window and session names) are student-controlled text;
// treat them, and Data, as untrusted.
type Notification struct {
	// Kind is the word after '%': "output", "exit", "window-add",
	// "window-close", "window-renamed", "layout-change",
	// "pane-mode-changed", "sessions-changed", "session-changed", ...
	// %extended-output is reported as "output".
	Kind string
	// Pane is set for output, pane-mode-changed, window-pane-changed,
	// pause and continue.
	Pane PaneID
	// Window is set for the window-* and layout-change notifications.
	Window WindowID
	// Args is the rest of the line after the kind, raw.
	Args string
	// Data is the decoded %output payload: the bytes the program wrote,
	// escape sequences included.
	Data []byte
	// Dropped counts notifications this subscriber lost, because its
	// buffer was full, just before this one.
	Dropped uint64
}

// parseNotification decodes a line starting with '%'.
func parseNotification(line []byte) Notification {
	var n Notification
	word, rest, _ := bytes.Cut(line[1:], []byte(" "))
	n.Kind = string(word)
	switch n.Kind {
	case "output":
		id, data, _ := bytes.Cut(rest, []byte(" "))
		n.Pane = PaneID(id)
		n.Data = unescapeOutput(data)
		return n
	case "extended-output":
		// %extended-output %PANE AGE ... : DATA
		id, after, _ := bytes.Cut(rest, []byte(" "))
		_, data, _ := bytes.Cut(after, []byte(" : "))
		n.Kind = "output"
		n.Pane = PaneID(id)
		n.Data = unescapeOutput(data)
		return n
	}
	n.Args = string(rest)
	first, second, _ := bytes.Cut(rest, []byte(" "))
	switch {
	case len(first) > 0 && first[0] == '%':
		n.Pane = PaneID(first)
	case len(first) > 0 && first[0] == '@':
		n.Window = WindowID(first)
		if n.Kind == "window-pane-changed" {
			n.Pane = PaneID(second)
		}
	}
	if n.Pane != "" && n.Pane.check() != nil {
		n.Pane = ""
	}
	if n.Window != "" && n.Window.check() != nil {
		n.Window = ""
	}
	return n
}

// Subscription receives notifications through a bounded buffer. The reader
// never waits for a subscriber: when the buffer is full the notification is
// dropped, Lost grows, and the next delivered notification carries the
// number dropped before it in Dropped.
type Subscription struct {
	c       *Client
	pane    PaneID
	ch      chan Notification
	pending uint64 // dropped since the last delivery; reader goroutine only
	lost    atomic.Uint64
}

// C is the channel of notifications. It is closed when the subscription is
// closed or the connection ends.
func (s *Subscription) C() <-chan Notification { return s.ch }

// Lost is the total number of notifications dropped for this subscriber.
func (s *Subscription) Lost() uint64 { return s.lost.Load() }

// Close stops the subscription and closes its channel.
func (s *Subscription) Close() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if _, ok := s.c.subs[s]; ok {
		delete(s.c.subs, s)
		close(s.ch)
	}
}

// offer delivers n without blocking; the caller holds c.mu.
func (s *Subscription) offer(n Notification) {
	if s.pane != "" && n.Pane != s.pane {
		return
	}
	n.Dropped = s.pending
	select {
	case s.ch <- n:
		s.pending = 0
	default:
		s.pending++
		s.lost.Add(1)
	}
}

// Subscribe returns a subscription to the notifications of one pane (pane
// "" for all notifications) with a buffer of the given size (at least 1).
// If the connection is already closed the channel is closed at once.
func (c *Client) Subscribe(pane PaneID, buffer int) (*Subscription, error) {
	if pane != "" {
		if err := pane.check(); err != nil {
			return nil, err
		}
	}
	s := &Subscription{c: c, pane: pane, ch: make(chan Notification, max(buffer, 1))}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(s.ch)
		return s, nil
	}
	c.subs[s] = struct{}{}
	return s, nil
}

// tap is an internal subscriber called synchronously by the reader
// goroutine. It must not block or call back into the Client.
type tap func(*Notification)

// addTap registers fn and returns a function that removes it. fn may run
// once more after removal returns.
func (c *Client) addTap(fn tap) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tapSeq++
	id := c.tapSeq
	c.taps[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.taps, id)
	}
}

// termtextLine makes a short single line of untrusted text for an error.
func termtextLine(s string) string {
	return termtext.Clip(termtext.String(strings.ReplaceAll(s, "\n", " ")), 200)
}

// dispatch fans a notification line out; reader goroutine only.
func (c *Client) dispatch(line []byte) {
	n := parseNotification(line)
	if n.Kind == "exit" {
		c.exitReason = termtextLine(n.Args)
	}
	if n.Kind == "session-changed" && !c.attachedSeen {
		c.attachedSeen = true
		close(c.attached)
	}
	c.mu.Lock()
	taps := make([]tap, 0, len(c.taps))
	for _, t := range c.taps {
		taps = append(taps, t)
	}
	for s := range c.subs {
		s.offer(n)
	}
	c.mu.Unlock()
	for _, t := range taps {
		t(&n)
	}
}
