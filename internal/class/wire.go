package class

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/termtext"
)

// The budget of one student's MCP session. Whatever answers the teacher's
// SSH connection may be a program the student wrote, so the link spends
// no more than this on it, whatever it sends.
const (
	// maxInFlight bounds the teacher side's own requests waiting on one
	// student: further calls wait for a slot (or their deadline).
	maxInFlight = 8
	// maxPeerRequests is how many JSON-RPC requests the student's side may
	// send before it is cut off. A gate asks the teacher's side nothing;
	// such requests are read, counted and dropped, never answered.
	maxPeerRequests = 16
	// maxUnasked bounds notifications and replies to nothing the teacher's
	// side is waiting for (a late reply to a call that timed out is one).
	maxUnasked = 1024
	// writeTimeout is how long one message to the student may wait for
	// ssh to take it: a side that stops reading is cut off.
	writeTimeout = 10 * time.Second
)

// errLong cuts off a side whose message would not fit in maxLine.
var errLong = fmt.Errorf("%w: a message from the student's side is longer than 1 MiB", errCutOff)

// errCutOff marks why a student's session was ended by the teacher's
// side for going past its budget.
var errCutOff = errors.New("cut off")

// wire is the MCP client transport of one student's link: mcp-go's stdio
// transport starts a goroutine and writes a reply (without a deadline)
// for every request the peer sends, which a hostile side turns into
// unbounded memory and a stuck shutdown. wire answers no request from
// the student's side, bounds every line, the requests in flight and the
// time of every write, and cuts the student off past any of these.
type wire struct {
	w     *os.File // ssh's stdin: a pipe, so writes take a deadline
	r     io.Reader
	slots chan struct{}
	beat  chan struct{} // the heartbeat's own slot: full slots cannot starve it
	wmu   chan struct{} // one writer at a time
	wait  time.Duration // writeTimeout
	born  time.Time
	heard atomic.Int64 // the last byte from the student's side, since born
	pings atomic.Int64

	mu       sync.Mutex
	pending  map[string]chan *transport.JSONRPCResponse
	peerReqs int
	unasked  int

	done    chan struct{}
	doneErr error
	once    sync.Once
}

func newWire(w *os.File, r io.Reader) *wire {
	t := &wire{w: w, r: r, wait: writeTimeout, slots: make(chan struct{}, maxInFlight), beat: make(chan struct{}, 1), wmu: make(chan struct{}, 1),
		pending: map[string]chan *transport.JSONRPCResponse{}, done: make(chan struct{})}
	t.born = time.Now()
	return t
}

// quiet is how long the student's side has sent nothing (on the monotonic
// clock: a step of the wall clock is no silence).
func (t *wire) quiet() time.Duration {
	return time.Since(t.born) - time.Duration(t.heard.Load())
}

// hearing notes every byte as it arrives, not per line: a long answer
// over a slow link is heard while it is still coming.
type hearing struct{ t *wire }

func (h hearing) Read(p []byte) (int, error) {
	n, err := h.t.r.Read(p)
	if n > 0 {
		h.t.heard.Store(int64(time.Since(h.t.born)))
	}
	return n, err
}

var _ transport.Interface = (*wire)(nil)

// Start reads the student's side until it ends or is cut off.
func (t *wire) Start(context.Context) error {
	go t.read()
	return nil
}

// end closes the link once, with why.
func (t *wire) end(err error) {
	t.once.Do(func() {
		t.mu.Lock()
		t.doneErr = err
		t.mu.Unlock()
		close(t.done)
		t.w.Close()
	})
}

// Err is why the link ended (nil while it is open).
func (t *wire) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneErr
}

func (t *wire) read() {
	// bufio's default size: a class holds one link per student and each
	// link's buffer stays resident (64 KiB each held 14 MiB more at 200
	// students, with no faster overview); a longer line goes through long.
	br := bufio.NewReader(hearing{t})
	var long []byte // a line longer than br's buffer, up to maxLine
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxLine {
				t.end(errLong)
				return
			}
			long = append(long, chunk...)
			continue
		}
		if err != nil {
			t.end(fmt.Errorf("the student's side closed the session"))
			return
		}
		line := chunk
		if long != nil {
			if len(long)+len(chunk) > maxLine {
				t.end(errLong)
				return
			}
			line, long = append(long, chunk...), nil
		}
		if err := t.handle(line); err != nil {
			t.end(err)
			return
		}
	}
}

// handle takes one line: a reply goes to the call waiting for it; a
// request or notification from the student's side is counted and
// dropped.
func (t *wire) handle(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var m struct {
		ID     json.RawMessage          `json:"id"`
		Method *json.RawMessage         `json:"method"`
		Result json.RawMessage          `json:"result"`
		Error  *mcp.JSONRPCErrorDetails `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return t.unaskedOne()
	}
	if m.Method != nil {
		if len(m.ID) > 0 && string(m.ID) != "null" {
			t.mu.Lock()
			t.peerReqs++
			n := t.peerReqs
			t.mu.Unlock()
			if n > maxPeerRequests {
				return fmt.Errorf("%w: the student's side sent more than %d requests to the teacher's side (a gate sends none)", errCutOff, maxPeerRequests)
			}
			return nil
		}
		return t.unaskedOne()
	}
	var id mcp.RequestId
	if len(m.ID) == 0 || json.Unmarshal(m.ID, &id) != nil || id.IsNil() {
		return t.unaskedOne()
	}
	t.mu.Lock()
	ch := t.pending[id.String()]
	delete(t.pending, id.String())
	t.mu.Unlock()
	if ch == nil {
		return t.unaskedOne()
	}
	res := &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: m.Result}
	if m.Error != nil {
		// Only the text goes on, cleaned and bounded, under a code mcp-go
		// maps to a plain error: the caller quotes it as the student's.
		res.Result, res.Error = nil, &mcp.JSONRPCErrorDetails{Code: studentErrorCode, Message: termtext.Line(m.Error.Message, maxSaid)}
	}
	ch <- res
	return nil
}

// studentErrorCode is the code every error from the student's side gets.
const studentErrorCode = -32099

// maxSaid bounds the text of one error from the student's side.
const maxSaid = 300

func (t *wire) unaskedOne() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unasked++; t.unasked > maxUnasked {
		return fmt.Errorf("%w: the student's side sent more than %d messages the teacher's side did not ask for", errCutOff, maxUnasked)
	}
	return nil
}

// closedErr is what a call on an ended link returns.
func (t *wire) closedErr() error {
	if err := t.Err(); err != nil {
		return err
	}
	return errors.New("the session is closed")
}

// SendRequest writes the request and waits for its reply, its context or
// the link's end, whichever comes first.
func (t *wire) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	return t.send(ctx, req, t.slots)
}

// ping sends a JSON-RPC ping on the heartbeat's slot and waits for its
// reply. Its ids are strings, apart from mcp-go's numbers.
func (t *wire) ping(ctx context.Context) error {
	id := mcp.NewRequestId(fmt.Sprintf("beat-%d", t.pings.Add(1)))
	_, err := t.send(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: string(mcp.MethodPing)}, t.beat)
	return err
}

func (t *wire) send(ctx context.Context, req transport.JSONRPCRequest, slots chan struct{}) (*transport.JSONRPCResponse, error) {
	select {
	case <-t.done:
		return nil, t.closedErr()
	default:
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("no free slot for another call to this student (%d in flight): %w", cap(slots), ctx.Err())
	case <-t.done:
		return nil, t.closedErr()
	}
	defer func() { <-slots }()
	key := req.ID.String()
	ch := make(chan *transport.JSONRPCResponse, 1)
	t.mu.Lock()
	t.pending[key] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.pending, key)
		t.mu.Unlock()
	}()
	if req.JSONRPC == "" {
		req.JSONRPC = mcp.JSONRPC_VERSION
	}
	if err := t.write(ctx, req); err != nil {
		return nil, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.done:
		return nil, t.closedErr()
	}
}

// SendNotification writes a notification (the handshake's initialized).
func (t *wire) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.write(ctx, n)
}

// write sends one message within writeTimeout; a student whose side does
// not take it by then is cut off.
func (t *wire) write(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a message to the student: %w", err)
	}
	select {
	case t.wmu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.done:
		return t.closedErr()
	}
	defer func() { <-t.wmu }()
	select {
	case <-t.done:
		return t.closedErr()
	default:
	}
	if err := t.w.SetWriteDeadline(time.Now().Add(t.wait)); err != nil {
		if e := t.Err(); e != nil {
			return e
		}
		return fmt.Errorf("set a deadline on the write to ssh: %w", err)
	}
	if _, err := t.w.Write(append(data, '\n')); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: the student's side took nothing the teacher's side sent for %v", errCutOff, t.wait)
			t.end(err)
			return err
		}
		if e := t.Err(); e != nil {
			return e
		}
		return fmt.Errorf("write to ssh: %w", err)
	}
	return nil
}

// SetNotificationHandler drops the handler: the class uses no
// notification of the student's side.
func (t *wire) SetNotificationHandler(func(mcp.JSONRPCNotification)) {}

// Close ends the link.
func (t *wire) Close() error {
	t.end(errors.New("the session is closed"))
	return nil
}

func (t *wire) GetSessionId() string { return "" }
