// Package tcprelaytest is a TCP relay for tests that can go silent: it
// stops passing bytes either way without closing anything, as a network
// that drops a machine's packets does (a laptop closed, a cable pulled),
// and passes them again on Forward.
package tcprelaytest

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Relay forwards every connection to its loopback Port on to a target.
type Relay struct {
	Port int

	target string
	l      net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	silent bool
	delay  time.Duration
	back   int64 // chunks passed from the target back to the client
	closed bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Start relays 127.0.0.1:Port to target (host:port) until the test ends.
func Start(tb testing.TB, target string) *Relay {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Relay{Port: l.Addr().(*net.TCPAddr).Port, target: target, l: l, conns: map[net.Conn]bool{}}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(1)
	go r.accept()
	tb.Cleanup(r.close)
	return r
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// Silence stops the relay passing bytes: what it reads from then on is
// held (a new connection is accepted and held too), nothing is closed.
func (r *Relay) Silence() {
	r.mu.Lock()
	r.silent = true
	r.mu.Unlock()
}

// Forward passes bytes again, the held ones first.
func (r *Relay) Forward() {
	r.mu.Lock()
	r.silent = false
	r.mu.Unlock()
	r.cond.Broadcast()
}

// Delay holds every chunk d before passing it on: a slow link, but a
// live one.
func (r *Relay) Delay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

// Back is how many chunks the relay has passed from the target back to
// its clients.
func (r *Relay) Back() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.back
}

// pass waits while the relay is silent; false once it is closed.
func (r *Relay) pass() bool {
	r.mu.Lock()
	d := r.delay
	r.mu.Unlock()
	if d > 0 {
		time.Sleep(d) // the link's latency
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.silent && !r.closed {
		r.cond.Wait()
	}
	return !r.closed
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = true
	return true
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.relay(c)
		}()
	}
}

func (r *Relay) relay(c net.Conn) {
	defer c.Close()
	if !r.pass() {
		return
	}
	s, err := net.Dial("tcp", r.target)
	if err != nil || !r.track(s) {
		return
	}
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.copy(s, c, nil)
	}()
	r.copy(c, s, &r.back)
	<-done
}

// copy passes src to dst while the relay forwards; src's end half-closes
// dst.
func (r *Relay) copy(dst, src net.Conn, count *int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !r.pass() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if count != nil {
				r.mu.Lock()
				*count++
				r.mu.Unlock()
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
				return
			}
			dst.Close()
			return
		}
	}
}

func (r *Relay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.cond.Broadcast()
	r.l.Close()
	r.wg.Wait()
}
