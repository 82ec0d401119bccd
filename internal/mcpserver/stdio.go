package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/lib/jsonwire"
)

// The stdio transport: newline-delimited JSON-RPC on the process's stdin
// and stdout, with mcp-go's MCPServer doing the protocol work
// (HandleMessage). It replaces mcp-go's StdioServer for three reasons:
//   - responses are written by one fast encoder: mcp-go marshals a tool
//     result through nested MarshalJSON methods, and encoding/json then
//     re-scans every nested level, which cost more than the tool itself for
//     a 1,000-line buffer read;
//   - requests other than initialize and ping are refused until the client
//     has initialized, so nothing runs for a client that skipped the
//     handshake;
//   - the size limit applies while reading, not after.

const (
	// maxInFlight bounds concurrently served requests. Several tools wait
	// (pane_wait, gdb run control, task_action), so enough that a few long
	// waits never starve quick calls; beyond it the reader waits.
	maxInFlight = 32
	// drainGrace is how long requests already read may finish after the
	// input ends before they are cancelled.
	drainGrace = 2 * time.Second

	codeNotInitialized = -32002
)

// stdioSession is the single client of a stdio server.
type stdioSession struct {
	id          string
	notes       chan mcp.JSONRPCNotification
	initialized atomic.Bool
	logLevel    atomic.Value // mcp.LoggingLevel
}

func (s *stdioSession) SessionID() string { return s.id }
func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notes
}
func (s *stdioSession) Initialize() {
	s.logLevel.Store(mcp.LoggingLevelError)
	s.initialized.Store(true)
}
func (s *stdioSession) Initialized() bool                  { return s.initialized.Load() }
func (s *stdioSession) SetLogLevel(level mcp.LoggingLevel) { s.logLevel.Store(level) }
func (s *stdioSession) GetLogLevel() mcp.LoggingLevel {
	if l, ok := s.logLevel.Load().(mcp.LoggingLevel); ok {
		return l
	}
	return mcp.LoggingLevelError
}

var _ server.SessionWithLogging = (*stdioSession)(nil)

// stdioTransport serves one MCPServer on a pair of streams.
type stdioTransport struct {
	mcp     *server.MCPServer
	maxLine int
	logf    func(string, ...any)

	wmu sync.Mutex
	out io.Writer
	// bufs recycles response buffers: a large result is then written
	// without allocating (and zeroing) a fresh buffer each time.
	bufs sync.Pool

	// ready is set once an initialize request has been answered.
	ready atomic.Bool
}

// serve reads requests until in ends or ctx is cancelled.
func (t *stdioTransport) serve(ctx context.Context, session string, in io.Reader) error {
	sess := &stdioSession{id: session, notes: make(chan mcp.JSONRPCNotification, 64)}
	if err := t.mcp.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("register session: %w", err)
	}
	defer t.mcp.UnregisterSession(context.WithoutCancel(ctx), sess.id)

	reqCtx, cancel := context.WithCancel(t.mcp.WithContext(ctx, sess))
	defer cancel()
	go t.forwardNotifications(reqCtx, sess.notes)

	// The reader dispatches what it reads itself: a request goes from the
	// pipe to a worker in one hand-over, not two.
	w := &workers{ctx: reqCtx, sem: make(chan struct{}, maxInFlight), jobs: make(chan func())}
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := readLimited(br, t.maxLine)
			if line == nil && err == nil {
				t.logf("dropped a message over %d bytes", t.maxLine)
				t.writeError(nil, mcp.PARSE_ERROR, fmt.Sprintf("message over %d bytes dropped", t.maxLine))
			} else if len(line) > 0 {
				if reqCtx.Err() != nil {
					return
				}
				t.dispatch(reqCtx, line, w)
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()

	var err error
	select {
	case err = <-readErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Let requests already read finish (a client may send its last call
	// and close its end), then cancel what still runs.
	done := make(chan struct{})
	go func() { w.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		cancel()
		<-done
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// workers run requests, at most maxInFlight at a time. A worker stays for
// the next request once it is done: its stack has grown to what a call
// needs (mcp-go's dispatch is deep), and a fresh goroutine per request
// would grow one again, copy by copy, every time.
type workers struct {
	ctx  context.Context
	sem  chan struct{}
	jobs chan func() // to an idle worker

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup // requests taken and not yet answered
}

// run has job done by a worker, once one of maxInFlight slots is free
// (the reader waits meanwhile). It reports false once the session ends.
func (w *workers) run(job func()) bool {
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return false
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		<-w.sem
		return false
	}
	w.wg.Add(1)
	w.mu.Unlock()
	select {
	case w.jobs <- job:
	default:
		go w.work(job)
	}
	return true
}

func (w *workers) work(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		<-w.sem
		w.wg.Done()
		idle.Reset(workerIdle)
		select {
		case job = <-w.jobs:
		case <-idle.C:
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// stop takes no more requests and waits for those taken.
func (w *workers) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.wg.Wait()
}

// workerIdle is how long a worker waits for another request before it
// ends: a burst's workers do not outlive it for long.
const workerIdle = 30 * time.Second

// envelope is what dispatch needs of a message; HandleMessage parses the rest.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (t *stdioTransport) dispatch(ctx context.Context, line []byte, w *workers) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if line[0] == '[' {
		if json.Valid(line) {
			t.writeError(nil, mcp.INVALID_REQUEST, "batches are not supported: send one JSON-RPC message per line")
		} else {
			t.writeError(nil, mcp.PARSE_ERROR, "Parse error")
		}
		return
	}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(line) {
			t.writeError(nil, mcp.PARSE_ERROR, "Parse error")
		} else {
			t.writeError(nil, mcp.INVALID_REQUEST, "not a JSON-RPC message: "+err.Error())
		}
		return
	}
	id, idOK := requestID(env.ID)
	if !idOK {
		t.writeError(nil, mcp.INVALID_REQUEST, "a request id must be a string or a number")
		return
	}
	if env.Method == nil {
		if id != nil && (env.Result != nil || env.Error != nil) {
			return // a reply to a request we never send: ignore it
		}
		t.writeError(id, mcp.INVALID_REQUEST, "a request needs a method")
		return
	}
	method := *env.Method
	// JSON text is UTF-8 (RFC 8259) and a lone surrogate escape names no
	// character. encoding/json would quietly turn both into U+FFFD, so two
	// different paths or patterns could reach a tool as the same string;
	// refuse the message instead.
	if msg := unicodeProblem(line); msg != "" {
		if id == nil {
			t.logf("dropped a notification: %s", msg)
			return
		}
		t.writeError(id, mcp.PARSE_ERROR, "Parse error: "+msg)
		return
	}
	if id == nil {
		// Notifications are handled in order, on the reader: the
		// initialized notification must precede the calls after it.
		t.handle(ctx, nil, line)
		return
	}
	if !t.ready.Load() && method != string(mcp.MethodInitialize) && method != string(mcp.MethodPing) {
		t.writeError(id, codeNotInitialized, "the session is not initialized: send initialize (and notifications/initialized) first")
		return
	}
	w.run(func() {
		resp := t.handle(ctx, id, line)
		if resp == nil {
			return
		}
		if _, ok := resp.(mcp.JSONRPCResponse); ok && method == string(mcp.MethodInitialize) {
			t.ready.Store(true)
		}
		t.writeMessage(resp)
	})
}

// handle runs one message through the MCP server, turning a panic into an
// internal error (for a request, id non-nil) so the process keeps serving.
func (t *stdioTransport) handle(ctx context.Context, id any, line []byte) (resp mcp.JSONRPCMessage) {
	defer func() {
		if r := recover(); r != nil {
			t.logf("panic while handling a message: %v", r)
			resp = nil
			if id != nil {
				resp = mcp.NewJSONRPCError(mcp.NewRequestId(id), mcp.INTERNAL_ERROR, fmt.Sprintf("internal error: %v", r), nil)
			}
		}
	}()
	return t.mcp.HandleMessage(withCallFacts(ctx), json.RawMessage(line))
}

// requestID decodes a JSON-RPC id: nil when absent or null, a string, or a
// number (kept as json.Number so large ids survive). ok is false for other
// types.
func requestID(raw json.RawMessage) (id any, ok bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	// What nearly every client sends (raw is valid JSON: the envelope was
	// decoded): a number of digits, or a string without escapes.
	if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return i, true
	}
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : n-1]), true
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, true
		}
		if f, err := v.Float64(); err == nil {
			return f, true
		}
	}
	return nil, false
}

// unicodeProblem describes the first invalid UTF-8 byte or lone surrogate
// escape (\uD800-\uDFFF not in a high-low pair) of a JSON message, or
// returns "". line has already been decoded once, so its escapes are
// well formed.
func unicodeProblem(line []byte) string {
	if !utf8.Valid(line) {
		for i := 0; i < len(line); {
			r, n := utf8.DecodeRune(line[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d: a message must be UTF-8 text", i)
			}
			i += n
		}
	}
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], '\\')
		if j < 0 || i+j+1 >= len(line) {
			return ""
		}
		i += j
		if line[i+1] != 'u' {
			i += 2 // \\, \", \n ...: the escaped byte is not an escape
			continue
		}
		r, ok := hex4(line[i+2:])
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r < 0xdc00 && len(line) >= i+12 && line[i+6] == '\\' && line[i+7] == 'u':
			if lo, ok := hex4(line[i+8:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 12 // a surrogate pair: one character
				continue
			}
			fallthrough
		default:
			return fmt.Sprintf("lone surrogate \\u%04x at byte %d: it is not a character", r, i)
		}
		i += 6
	}
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (t *stdioTransport) forwardNotifications(ctx context.Context, notes <-chan mcp.JSONRPCNotification) {
	for {
		select {
		case n := <-notes:
			t.writeMessage(n)
		case <-ctx.Done():
			return
		}
	}
}

func (t *stdioTransport) writeError(id any, code int, msg string) {
	t.writeMessage(mcp.NewJSONRPCError(mcp.NewRequestId(id), code, msg, nil))
}

func (t *stdioTransport) writeMessage(m mcp.JSONRPCMessage) {
	bp, _ := t.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, err := appendMessage((*bp)[:0], m)
	if err != nil {
		t.logf("encode a response: %v", err)
		return
	}
	data = append(data, '\n')
	t.wmu.Lock()
	_, err = t.out.Write(data)
	t.wmu.Unlock()
	if err != nil {
		t.logf("write a response: %v", err)
	}
	if cap(data) <= maxPooledBuf {
		*bp = data
		t.bufs.Put(bp)
	}
}

// maxPooledBuf bounds the buffers kept for reuse.
const maxPooledBuf = 1 << 20

// appendMessage appends the JSON of m to dst, with a fast path for what
// nearly every response is: a tool result of text content only.
func appendMessage(dst []byte, m mcp.JSONRPCMessage) ([]byte, error) {
	if r, ok := m.(mcp.JSONRPCResponse); ok {
		var res *mcp.CallToolResult
		switch v := r.Result.(type) {
		case *mcp.CallToolResult:
			res = v
		case mcp.CallToolResult:
			res = &v
		}
		if res != nil && plainToolResult(res) {
			return appendToolResult(dst, r.ID, res)
		}
	}
	data, err := json.Marshal(m)
	return append(dst, data...), err
}

// plainToolResult reports whether res holds nothing but text content (and,
// for a tool error, its code as structured content), which
// appendToolResult writes exactly as CallToolResult.MarshalJSON would.
func plainToolResult(res *mcp.CallToolResult) bool {
	if res.Meta != nil || len(res.RawStructuredContent) > 0 || len(res.InputRequests) > 0 || res.RequestState != "" {
		return false
	}
	if _, ok := res.StructuredContent.(errcode.Wire); res.StructuredContent != nil && !ok {
		return false
	}
	for _, c := range res.Content {
		tc, ok := c.(mcp.TextContent)
		if !ok || tc.Meta != nil || tc.Annotations != nil || tc.Type != "text" {
			return false
		}
	}
	return true
}

func appendToolResult(b []byte, id mcp.RequestId, res *mcp.CallToolResult) ([]byte, error) {
	idJSON, err := json.Marshal(id)
	if err != nil {
		return b, err
	}
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"result":{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = jsonwire.AppendString(b, c.(mcp.TextContent).Text)
		b = append(b, '}')
	}
	b = append(b, ']')
	if w, ok := res.StructuredContent.(errcode.Wire); ok {
		b = append(b, `,"structuredContent":{"error":{"code":`...)
		b = jsonwire.AppendString(b, string(w.Error.Code))
		b = append(b, `,"message":`...)
		b = jsonwire.AppendString(b, w.Error.Message)
		b = append(b, "}}"...)
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if res.ResultType != "" {
		b = append(b, `,"resultType":`...)
		b = jsonwire.AppendString(b, string(res.ResultType))
	}
	b = append(b, "}}"...)
	return b, nil
}
