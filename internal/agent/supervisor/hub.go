package supervisor

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/agent/ptyproto"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/termtext"
)

// hub holds the relays connected to one agent.
type hub struct {
	spec   runspec.Spec
	lg     *log.Logger
	first  chan *relayConn
	change chan struct{}

	// inMu orders writes to the agent's input: the student's keys and
	// the event lines typed between them (see inject).
	inMu sync.Mutex

	mu         sync.Mutex
	relays     map[*relayConn]bool
	term       terminal
	rows, cols int
	started    bool
	sentFirst  bool
	// lastKey is when a window last sent keys, lastOutput when the agent
	// last wrote to its terminal.
	lastKey, lastOutput time.Time
}

type relayConn struct {
	conn  net.Conn
	hello ptyproto.HelloMsg
	wmu   sync.Mutex
}

func (r *relayConn) write(typ byte, p []byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if typ == ptyproto.Data {
		return ptyproto.WriteData(r.conn, p)
	}
	return ptyproto.WriteFrame(r.conn, typ, p)
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.relays)
}

func (h *hub) changed() {
	select {
	case h.change <- struct{}{}:
	default:
	}
}

func (h *hub) setTerm(t terminal, rows, cols int) {
	h.mu.Lock()
	h.term, h.rows, h.cols, h.started = t, rows, cols, true
	h.mu.Unlock()
}

func (h *hub) accept(ln *net.UnixListener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go h.serve(c)
	}
}

// serve runs one relay connection.
func (h *hub) serve(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, p, err := ptyproto.ReadFrameMax(c, ptyproto.MaxFromRelay)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	r := &relayConn{conn: c}
	reply := ptyproto.HelloMsg{Version: ptyproto.Version, Agent: h.spec.ID, Provider: h.spec.Provider, Instance: h.spec.Instance}
	if typ != ptyproto.Hello || json.Unmarshal(p, &r.hello) != nil {
		return
	}
	if r.hello.Version != ptyproto.Version {
		reply.Error = fmt.Sprintf("relay protocol %d, host %d: rebuild stemctl and stem-mcp together", r.hello.Version, ptyproto.Version)
		ptyproto.WriteJSON(c, ptyproto.Hello, reply)
		return
	}
	if err := ptyproto.WriteJSON(c, ptyproto.Hello, reply); err != nil {
		return
	}
	h.mu.Lock()
	if h.relays == nil {
		h.relays = map[*relayConn]bool{}
	}
	h.relays[r] = true
	isFirst := !h.sentFirst
	h.sentFirst = true
	started := h.started
	h.mu.Unlock()
	h.lg.Printf("window connected (TERM=%s, %dx%d)", termtext.Line(r.hello.Term, 64), r.hello.Cols, r.hello.Rows)
	h.changed()
	if isFirst {
		h.first <- r
	} else if started {
		h.resize(r.hello.Rows, r.hello.Cols, true)
	}
	defer func() {
		h.mu.Lock()
		delete(h.relays, r)
		h.mu.Unlock()
		h.lg.Printf("window disconnected")
		h.changed()
	}()
	for {
		typ, p, err := ptyproto.ReadFrameMax(c, ptyproto.MaxFromRelay)
		if err != nil {
			return
		}
		switch typ {
		case ptyproto.Data:
			h.input(p)
		case ptyproto.Size:
			if rows, cols, err := ptyproto.ParseSize(p); err == nil {
				h.resize(rows, cols, false)
			}
		}
	}
}

// resize sets the terminal size; redraw forces a SIGWINCH even when the
// size stays the same, so a full-screen agent repaints for a new window.
func (h *hub) resize(rows, cols int, redraw bool) {
	if rows <= 0 || cols <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.term == nil {
		return
	}
	if redraw && rows == h.rows && cols == h.cols && rows > 1 {
		h.term.setSize(rows-1, cols)
	}
	h.term.setSize(rows, cols)
	h.rows, h.cols = rows, cols
}

// pump copies the agent's output to every relay until the terminal ends.
func (h *hub) pump(ptmx io.Reader) {
	buf := make([]byte, 32<<10)
	var apc apcStrip
	var out []byte
	for {
		n, err := ptmx.Read(buf)
		out = apc.filter(out[:0], buf[:n])
		if len(out) > 0 {
			h.mu.Lock()
			h.lastOutput = time.Now()
			rs := make([]*relayConn, 0, len(h.relays))
			for r := range h.relays {
				rs = append(rs, r)
			}
			h.mu.Unlock()
			for _, r := range rs {
				if werr := r.write(ptyproto.Data, out); werr != nil {
					r.conn.Close() // its reader ends and unregisters it
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *hub) closeAll(ex ptyproto.ExitMsg) {
	data, _ := json.Marshal(ex)
	h.mu.Lock()
	rs := make([]*relayConn, 0, len(h.relays))
	for r := range h.relays {
		rs = append(rs, r)
	}
	h.mu.Unlock()
	for _, r := range rs {
		r.write(ptyproto.Exit, data)
		r.conn.Close()
	}
}
