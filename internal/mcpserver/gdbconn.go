package mcpserver

import (
	"context"
	"sync"

	"github.com/stem-edu/stem/internal/gdbmi"
)

// gdbLink is the lazily dialed channel into the student's gdb (through the
// bridge's g.sock). One goroutine pumps the client's events out to waiting
// tool calls and to the notification hub, so no event has two readers.
type gdbLink struct {
	mu      sync.Mutex
	client  GDBClient
	subs    map[int]chan gdbmi.Event
	next    int
	publish func(gdbmi.Event)
}

// gdb returns a live client, dialing g.sock if needed. A missing bridge
// gives gdbmi.ErrNotRunning.
func (c *conn) gdb(ctx context.Context) (GDBClient, error) {
	l := &c.gdbl
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		select {
		case <-l.client.Done():
			l.client = nil
		default:
			return l.client, nil
		}
	}
	cl, err := c.dialGDB(ctx)
	if err != nil {
		return nil, err
	}
	l.client = cl
	go l.pump(cl)
	if c.logf != nil {
		// From here on this server sees gdb's stops (a stop before is
		// gone for it): tests wait for this line.
		c.logf("connected to the gdb bridge of %s", c.target().Record.Instance)
	}
	return cl, nil
}

func (l *gdbLink) pump(cl GDBClient) {
	for ev := range cl.Events() {
		l.mu.Lock()
		for _, ch := range l.subs {
			select {
			case ch <- ev:
			default: // a waiter that fell behind only loses old events
			}
		}
		pub := l.publish
		l.mu.Unlock()
		if pub != nil {
			pub(ev)
		}
	}
}

// subscribe returns a channel of gdb events from now on.
func (c *conn) subscribeGDB() (<-chan gdbmi.Event, func()) {
	l := &c.gdbl
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs == nil {
		l.subs = map[int]chan gdbmi.Event{}
	}
	id := l.next
	l.next++
	ch := make(chan gdbmi.Event, 64)
	l.subs[id] = ch
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, id)
		l.mu.Unlock()
	}
}

func (c *conn) closeGDB() {
	l := &c.gdbl
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		l.client.Close()
		l.client = nil
	}
}
