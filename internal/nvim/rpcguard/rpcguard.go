// Package rpcguard is a validating reader that sits between a Neovim RPC
// socket and go-client's msgpack-RPC decoder.
//
// The Neovim on n.sock is the container's: whatever runs there can stop it,
// listen on n.sock and answer anything. go-client trusts the lengths a
// message claims and allocates for them before it reads the data: a
// five-byte reply `94 01 <id> dd ff ff ff ff` (an error value claiming an
// array of 2³²−1 elements) made the Go runtime die of an out-of-memory
// fatal error, which no recover catches, in every host process that asked
// (stemctl status, list and up, stem-mcp serve, the gate). A server could
// also stream requests and notifications that go-client answers or queues.
//
// Reader reads one whole message at a time and checks every header against
// Limits before it reads on: the message's size, each string's, each
// array's and map's length (also against the bytes the message may still
// hold, since every element takes at least one), the number of values and
// the nesting. Its own buffer grows only with bytes that really arrived.
// Only a message that passed reaches the decoder, which then allocates at
// most a small multiple of a bounded size. A violation is an *Error
// (errors.Is ErrRefused): the caller treats that server as broken; nothing
// else in the process is affected.
//
// Requests and notifications from the server are dropped unless
// Options.Accept takes their method: stem registers no handler, and
// go-client answers an unregistered request itself, quoting its method.
package rpcguard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Limits bound one message from the server.
type Limits struct {
	Message int // bytes in one message
	String  int // bytes in one string, binary or extension value
	Len     int // elements of one array, or pairs of one map
	Values  int // values in one message, at every depth
	Depth   int // nesting of arrays and maps (the message's own array is 1)
}

// DefaultLimits leaves room for everything stem asks Neovim (a 256 KiB
// buffer read, nvim_get_api_info's few thousand values, a full-level
// nvim_lua result of a few MiB) and keep the decoder's memory for one
// message in the tens of MiB.
func DefaultLimits() Limits {
	return Limits{Message: 8 << 20, String: 4 << 20, Len: 1 << 18, Values: 1 << 19, Depth: 32}
}

// ErrRefused matches every *Error.
var ErrRefused = errors.New("a message from the Neovim server was refused")

// Error says what a refused message claimed.
type Error struct{ What string }

func (e *Error) Error() string {
	return "the Neovim server sent " + e.What + "; stem refuses it and treats this Neovim as broken"
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *Error) Is(target error) bool { return target == ErrRefused }

func refuse(format string, args ...any) error { return &Error{What: fmt.Sprintf(format, args...)} }

// Options configure a Reader.
type Options struct {
	// Limits default to DefaultLimits() (field by field where zero).
	Limits Limits
	// Accept reports whether a request or notification with this method
	// is passed on. Nil: none is.
	Accept func(method string) bool
}

// Message kinds of msgpack-RPC.
const (
	kindRequest      = 0
	kindReply        = 1
	kindNotification = 2
)

// Reader passes on whole, checked messages. Read is not safe for
// concurrent use (go-client has one reader goroutine).
type Reader struct {
	src *bufio.Reader
	lim Limits
	acc func(string) bool

	msg   []byte // the message being passed on
	off   int    // how much of msg Read has returned
	err   error  // sticky: after an error nothing more is passed on
	stack []int  // values still to read in each open array or map
	child [4]int // offsets of the top array's first elements in msg

	dropped int
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader, opt Options) *Reader {
	lim, def := opt.Limits, DefaultLimits()
	lim.Message = positive(lim.Message, def.Message)
	lim.String = positive(lim.String, def.String)
	lim.Len = positive(lim.Len, def.Len)
	lim.Values = positive(lim.Values, def.Values)
	lim.Depth = positive(lim.Depth, def.Depth)
	return &Reader{src: bufio.NewReaderSize(r, 64<<10), lim: lim, acc: opt.Accept}
}

// Dropped is how many requests and notifications were not passed on.
func (g *Reader) Dropped() int { return g.dropped }

// Read returns bytes of checked messages. At the end of the stream it
// returns io.EOF, or io.ErrUnexpectedEOF inside a message; a refused
// message is an *Error, and so is every later Read.
func (g *Reader) Read(p []byte) (int, error) {
	for g.off == len(g.msg) {
		if g.err != nil {
			return 0, g.err
		}
		if err := g.next(); err != nil {
			g.err = err
			g.msg, g.off = nil, 0
			return 0, err
		}
	}
	n := copy(p, g.msg[g.off:])
	g.off += n
	return n, nil
}

// next reads messages until one is to be passed on.
func (g *Reader) next() error {
	for {
		if cap(g.msg) > 1<<20 {
			g.msg = nil // do not keep a large message's buffer
		}
		g.msg, g.off = g.msg[:0], 0
		if err := g.readMessage(); err != nil {
			return err
		}
		pass, err := g.route()
		if err != nil {
			return err
		}
		if pass {
			return nil
		}
		g.dropped++
	}
}

// readMessage reads one msgpack value into g.msg, checking as it goes.
func (g *Reader) readMessage() error {
	g.stack = append(g.stack[:0], 1) // the message itself: one value
	values := 0
	for len(g.stack) > 0 {
		top := len(g.stack) - 1
		if g.stack[top] == 0 {
			g.stack = g.stack[:top]
			continue
		}
		g.stack[top]--
		if top == 1 {
			// An element of the message's own array: remember where it
			// starts, for route.
			if i := g.topLen() - g.stack[1] - 1; i >= 0 && i < len(g.child) {
				g.child[i] = len(g.msg)
			}
		}
		values++
		if values > g.lim.Values {
			return refuse("a message of more than %d values", g.lim.Values)
		}
		n, container, err := g.header(values == 1)
		if err != nil {
			return err
		}
		if values == 1 && n != 3 && n != 4 {
			return refuse("a message of %d elements (msgpack-RPC has 3 or 4)", n)
		}
		if !container {
			continue
		}
		if len(g.stack) >= g.lim.Depth+1 {
			return refuse("values nested deeper than %d", g.lim.Depth)
		}
		g.stack = append(g.stack, n)
	}
	return nil
}

// topLen is the element count of the message's own array (read back from
// its header, the first bytes of msg).
func (g *Reader) topLen() int {
	n, _ := arrayLen(g.msg)
	return n
}

// header reads one value's header (and, for scalars, strings and
// extensions, its payload). For an array or map it returns the number of
// values it holds.
func (g *Reader) header(first bool) (n int, container bool, err error) {
	b, err := g.byte(first)
	if err != nil {
		return 0, false, err
	}
	if first && !(b >= 0x90 && b <= 0x9f || b == 0xdc || b == 0xdd) {
		return 0, false, refuse("a message that is not an array (first byte 0x%02x)", b)
	}
	switch {
	case b <= 0x7f, b >= 0xe0, b == 0xc0, b == 0xc2, b == 0xc3:
		return 0, false, nil
	case b >= 0x80 && b <= 0x8f:
		return g.container("a map", uint64(b&0x0f), 2)
	case b >= 0x90 && b <= 0x9f:
		return g.container("an array", uint64(b&0x0f), 1)
	case b >= 0xa0 && b <= 0xbf:
		return 0, false, g.payload("string", uint64(b&0x1f))
	}
	switch b {
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32
		l, err := g.length(b - 0xc4)
		if err != nil {
			return 0, false, err
		}
		return 0, false, g.payload("binary value", l)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, type, data
		l, err := g.length(b - 0xc7)
		if err != nil {
			return 0, false, err
		}
		if err := g.take(1); err != nil {
			return 0, false, err
		}
		return 0, false, g.payload("extension value", l)
	case 0xca, 0xcb: // float 32/64
		return 0, false, g.take(4 << (b - 0xca))
	case 0xcc, 0xcd, 0xce, 0xcf: // uint 8..64
		return 0, false, g.take(1 << (b - 0xcc))
	case 0xd0, 0xd1, 0xd2, 0xd3: // int 8..64
		return 0, false, g.take(1 << (b - 0xd0))
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16: type, data
		return 0, false, g.take(1 + 1<<(b-0xd4))
	case 0xd9, 0xda, 0xdb: // str 8/16/32
		l, err := g.length(b - 0xd9)
		if err != nil {
			return 0, false, err
		}
		return 0, false, g.payload("string", l)
	case 0xdc, 0xdd: // array 16/32
		l, err := g.length(b - 0xdc + 1)
		if err != nil {
			return 0, false, err
		}
		return g.container("an array", l, 1)
	case 0xde, 0xdf: // map 16/32
		l, err := g.length(b - 0xde + 1)
		if err != nil {
			return 0, false, err
		}
		return g.container("a map", l, 2)
	}
	return 0, false, refuse("the unused type byte 0x%02x", b) // 0xc1
}

// container checks an array of n elements (per = 1) or a map of n pairs
// (per = 2): within Len, and within the bytes the message may still hold.
func (g *Reader) container(what string, n uint64, per int) (int, bool, error) {
	unit := "elements"
	if per == 2 {
		unit = "pairs"
	}
	if n > uint64(g.lim.Len) {
		return 0, false, refuse("%s of %d %s (at most %d)", what, n, unit, g.lim.Len)
	}
	if len(g.msg)+int(n)*per > g.lim.Message {
		return 0, false, refuse("%s of %d %s in a message of at most %d bytes", what, n, unit, g.lim.Message)
	}
	return int(n) * per, true, nil
}

// length reads a big-endian length of 1, 2 or 4 bytes (size 0, 1, 2).
func (g *Reader) length(size byte) (uint64, error) {
	w := 1 << size
	start := len(g.msg)
	if err := g.take(w); err != nil {
		return 0, err
	}
	p := g.msg[start:]
	switch w {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	}
	return uint64(binary.BigEndian.Uint32(p)), nil
}

// payload reads l bytes of a string, binary or extension value.
func (g *Reader) payload(what string, l uint64) error {
	if l > uint64(g.lim.String) {
		return refuse("a %s of %d bytes (at most %d)", what, l, g.lim.String)
	}
	return g.take(int(l))
}

// byte reads one byte into msg; at the start of a message a clean end of
// the stream is io.EOF.
func (g *Reader) byte(first bool) (byte, error) {
	if err := g.room(1); err != nil {
		return 0, err
	}
	b, err := g.src.ReadByte()
	if err != nil {
		if err == io.EOF && !first {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	g.msg = append(g.msg, b)
	return b, nil
}

func (g *Reader) room(n int) error {
	if len(g.msg)+n > g.lim.Message {
		return refuse("a message of more than %d bytes", g.lim.Message)
	}
	return nil
}

// take reads n more bytes into msg. The buffer grows with what arrives,
// never ahead of it by more than one chunk.
func (g *Reader) take(n int) error {
	if err := g.room(n); err != nil {
		return err
	}
	const chunk = 64 << 10
	for n > 0 {
		c := min(n, chunk)
		start := len(g.msg)
		g.msg = slices.Grow(g.msg, c)[:start+c]
		if _, err := io.ReadFull(g.src, g.msg[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		n -= c
	}
	return nil
}

// route decides what to do with a complete message: pass a reply on, pass
// a request or notification on only when Accept takes its method, refuse
// anything that is not msgpack-RPC.
func (g *Reader) route() (bool, error) {
	n, _ := arrayLen(g.msg)
	kind, ok := intAt(g.msg, g.child[0])
	if n < 1 || !ok {
		return false, refuse("a message whose type is not a number")
	}
	method := func(i int) (string, error) {
		s, ok := strAt(g.msg, g.child[i])
		if !ok {
			return "", refuse("a request or notification whose method is not a string")
		}
		return s, nil
	}
	switch {
	case kind == kindReply && n == 4:
		return true, nil
	case kind == kindRequest && n == 4:
		m, err := method(2)
		return err == nil && g.acc != nil && g.acc(m), err
	case kind == kindNotification && n == 3:
		m, err := method(1)
		return err == nil && g.acc != nil && g.acc(m), err
	}
	return false, refuse("a message of type %d with %d elements", kind, n)
}

// arrayLen decodes the array header at the start of p.
func arrayLen(p []byte) (int, bool) {
	switch {
	case len(p) >= 1 && p[0] >= 0x90 && p[0] <= 0x9f:
		return int(p[0] & 0x0f), true
	case len(p) >= 3 && p[0] == 0xdc:
		return int(binary.BigEndian.Uint16(p[1:])), true
	case len(p) >= 5 && p[0] == 0xdd:
		return clampInt(uint64(binary.BigEndian.Uint32(p[1:]))), true
	}
	return 0, false
}

// intAt decodes a non-negative integer at p[off].
func intAt(p []byte, off int) (int64, bool) {
	if off <= 0 || off >= len(p) {
		return 0, false
	}
	b, rest := p[off], p[off+1:]
	switch {
	case b <= 0x7f:
		return int64(b), true
	case b == 0xcc && len(rest) >= 1:
		return int64(rest[0]), true
	case b == 0xcd && len(rest) >= 2:
		return int64(binary.BigEndian.Uint16(rest)), true
	case b == 0xce && len(rest) >= 4:
		return int64(binary.BigEndian.Uint32(rest)), true
	}
	return 0, false
}

// strAt decodes a string at p[off].
func strAt(p []byte, off int) (string, bool) {
	if off <= 0 || off >= len(p) {
		return "", false
	}
	b, rest := p[off], p[off+1:]
	var l, h int
	switch {
	case b >= 0xa0 && b <= 0xbf:
		l = int(b & 0x1f)
	case b == 0xd9 && len(rest) >= 1:
		l, h = int(rest[0]), 1
	case b == 0xda && len(rest) >= 2:
		l, h = int(binary.BigEndian.Uint16(rest)), 2
	case b == 0xdb && len(rest) >= 4:
		l, h = clampInt(uint64(binary.BigEndian.Uint32(rest))), 4
	default:
		return "", false
	}
	if h+l > len(rest) {
		return "", false
	}
	return string(rest[h : h+l]), true
}

func positive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func clampInt(v uint64) int {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(v)
}
