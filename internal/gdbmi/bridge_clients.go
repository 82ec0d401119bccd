package gdbmi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// accept serves g.sock: each connection gets a reader (its MI commands, one
// line each, checked by clientLine) and a writer (the records meant for it).
func (b *bridge) accept(ln *net.UnixListener) {
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			b.logf("accept: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c := &bclient{b: b, conn: conn, out: make(chan string, clientQueue), done: make(chan struct{})}
		b.mu.Lock()
		full := len(b.clients) >= b.opt.MaxClients
		if !full {
			b.clients[c] = struct{}{}
		}
		b.mu.Unlock()
		if full {
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			fmt.Fprintf(conn, "^error,msg=%s\n", Quote("bridge: too many clients"))
			conn.Close()
			continue
		}
		go c.writeLoop()
		go c.readLoop()
	}
}

func (b *bridge) clientList() []*bclient {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*bclient, 0, len(b.clients))
	for c := range b.clients {
		out = append(out, c)
	}
	return out
}

func (b *bridge) broadcast(line string) {
	for _, c := range b.clientList() {
		c.send(line)
	}
}

// bclient is one g.sock connection.
type bclient struct {
	b         *bridge
	conn      net.Conn
	name      string // set by -stem-client; guarded by b.mu
	out       chan string
	done      chan struct{}
	closeOnce sync.Once
}

func (c *bclient) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.conn.Close()
		c.b.mu.Lock()
		delete(c.b.clients, c)
		c.b.mu.Unlock()
	})
}

// send queues a line without blocking: a client that does not keep up is
// disconnected rather than allowed to stall gdb's output.
func (c *bclient) send(line string) {
	select {
	case <-c.done:
		return
	default:
	}
	select {
	case c.out <- line:
	default:
		c.b.logf("client too slow; disconnecting it")
		c.close()
	}
}

func (c *bclient) writeLoop() {
	w := bufio.NewWriter(c.conn)
	for {
		select {
		case <-c.done:
			return
		case l := <-c.out:
			_ = c.conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
			w.WriteString(l)
			w.WriteByte('\n')
			for more := true; more; {
				select {
				case l := <-c.out:
					w.WriteString(l)
					w.WriteByte('\n')
				default:
					more = false
				}
			}
			if err := w.Flush(); err != nil {
				c.close()
				return
			}
		}
	}
}

func (c *bclient) readLoop() {
	defer c.close()
	br := bufio.NewReader(c.conn)
	for {
		line, err := readLine(br, maxClientLine)
		if errors.Is(err, errLineTooLong) {
			c.send("^error,msg=" + Quote(fmt.Sprintf("bridge: command longer than %d bytes", maxClientLine)))
			// Let the writer flush the error before the connection closes.
			time.Sleep(50 * time.Millisecond)
			return
		}
		if err != nil {
			return
		}
		c.b.clientLine(c, line)
	}
}

// readLine reads one '\n'-terminated line without the terminator. A line
// over limit is consumed and reported as errLineTooLong.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > limit+1 {
				tooLong = true
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		if tooLong {
			return "", errLineTooLong
		}
		s := strings.TrimSuffix(string(buf), "\n")
		return strings.TrimSuffix(s, "\r"), nil
	}
}

// clientLine checks one line from a client and passes it to gdb.
func (b *bridge) clientLine(c *bclient, line string) {
	if line == "" {
		return
	}
	i := 0
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	tok, rest := line[:i], line[i:]
	if len(tok) > 19 {
		c.send("^error,msg=" + Quote("bridge: token longer than 19 digits"))
		return
	}
	if msg := checkClientCommand(rest); msg != "" {
		c.send(tok + "^error,msg=" + Quote("bridge: "+msg))
		return
	}
	op := strings.Fields(rest)[0]
	if op == stemClientOp {
		c.send(tok + b.nameClient(c, strings.TrimSpace(rest[len(op):])))
		return
	}
	b.submit(pend{c: c, tok: tok, op: op, args: strings.TrimSpace(rest[len(op):])}, rest)
}

// checkClientCommand accepts only MI commands ("-name args"), never CLI
// lines, and no control bytes that could split or disguise a command.
func checkClientCommand(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Sprintf("control byte 0x%02x in command", c)
		}
	}
	if len(s) < 2 || s[0] != '-' || s[1] < 'a' || s[1] > 'z' {
		return "only MI commands (-command ...) are accepted"
	}
	for i := 1; i < len(s) && s[i] != ' ' && s[i] != '\t'; i++ {
		if c := s[i]; !(c == '-' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return "malformed MI command name"
		}
	}
	return ""
}
