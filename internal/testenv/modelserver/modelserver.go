// Package modelserver is a scripted stand-in for the model APIs the agent
// CLIs talk to, for tests that run the real CLIs without a model, a key or
// the network. It speaks as much of each API as the CLIs need:
//
//   - Anthropic Messages (POST /v1/messages, SSE when "stream" is set):
//     Claude Code, with ANTHROPIC_BASE_URL pointing here;
//   - OpenAI Responses (POST /v1/responses, SSE): Codex, through a
//     [model_providers.X] entry with this base URL and wire_api="responses";
//   - Gemini (POST /v1beta/models/M:streamGenerateContent?alt=sse and
//     :generateContent): Gemini CLI, with GOOGLE_GEMINI_BASE_URL.
//
// A script is a list of steps ("call tool X with arguments Y", "answer
// Z"). Each request that offers the model tools and carries the turn on
// takes the next step; a request offering no tools (a title, a summary, a
// quota check) gets a short plain answer and takes none. Tool names are
// matched the way the CLIs prefix MCP tools: a step naming pane_list calls
// whichever offered tool is pane_list or ends in "__pane_list" (Claude's
// mcp__stem__pane_list), or is mcp_<server>_pane_list (Gemini's).
//
// Every request is recorded (path, the tools offered, the tool results and
// the system text it carried), so tests assert on what the CLI sent.
package modelserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Step is one scripted model turn: a tool call, or a final text answer.
type Step struct {
	// Tool, when set, is the tool to call (its stem name; see the package
	// comment for how it is matched to the CLI's name).
	Tool string
	Args map[string]any
	// Text is the answer when Tool is empty (and any text before a call).
	Text string
}

// Call returns a step that calls tool with args.
func Call(tool string, args map[string]any) Step { return Step{Tool: tool, Args: args} }

// Say returns a step that answers text and ends the turn.
func Say(text string) Step { return Step{Text: text} }

// API names the protocol of a request.
type API string

// The APIs the server speaks.
const (
	Anthropic API = "anthropic"
	OpenAI    API = "openai-responses"
	Gemini    API = "gemini"
)

// ToolResult is the output of one tool call as the CLI sent it back.
type ToolResult struct {
	// CallID is the id the server gave the call (Gemini: the tool name).
	CallID  string
	Content string
	IsError bool
}

// Request is one request the server received.
type Request struct {
	API    API
	Path   string
	Header http.Header
	Body   []byte
	// Model is the model the CLI asked for.
	Model string
	// Tools are the names of the tools offered to the model.
	Tools []string
	// System is the system / developer text the request carried.
	System string
	// Prompt is the text of the last user message (what the user typed,
	// or what was typed for them), without tool results.
	Prompt string
	// Results are the tool results in the request (the whole history: the
	// CLIs resend it every turn).
	Results []ToolResult
	// Step is the index of the script step this request took, or -1.
	Step int
	// Called is the CLI's name of the tool the answer called, if any.
	Called string
	Time   time.Time
}

// HasTool reports whether the request offered a tool matching name.
func (r Request) HasTool(name string) bool { return matchTool(r.Tools, name) != "" }

// Result returns the result of the call with the given id, if present.
func (r Request) Result(callID string) (ToolResult, bool) {
	for _, res := range r.Results {
		if res.CallID == callID {
			return res, true
		}
	}
	return ToolResult{}, false
}

// Server is a running scripted model.
type Server struct {
	URL string

	ln   net.Listener
	srv  *http.Server
	mu   sync.Mutex
	cond chan struct{} // closed and replaced on every new request
	reqs []Request
	// script and next are the steps and the next to take.
	script []Step
	next   int
	calls  int
	// calledIDs maps a call id the server issued to its step.
	calledIDs map[string]int
	// lastTurn and lastStep are the conversation a step was last taken
	// for, and that step: a CLI that gives up on a response and sends the
	// same request again gets the same step, as a stateless model API
	// would answer it, instead of the next one.
	lastTurn string
	lastStep int
}

// Start listens on a loopback port and serves script.
func Start(script ...Step) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model server: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, cond: make(chan struct{}), script: script, calledIDs: map[string]int{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// SetScript replaces the remaining script.
func (s *Server) SetScript(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.next, s.lastTurn = steps, 0, ""
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Wait returns the first request (in arrival order) for which ok is true,
// waiting for new ones until ctx ends.
func (s *Server) Wait(ctx context.Context, ok func(Request) bool) (Request, error) {
	seen := 0
	for {
		s.mu.Lock()
		reqs, ch := append([]Request(nil), s.reqs[seen:]...), s.cond
		seen = len(s.reqs)
		s.mu.Unlock()
		for _, r := range reqs {
			if ok(r) {
				return r, nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Request{}, fmt.Errorf("model server: no matching request among %d: %w", seen, ctx.Err())
		}
	}
}

// WaitResult waits for a request carrying the result of the call the
// server made for script step i.
func (s *Server) WaitResult(ctx context.Context, step int) (ToolResult, error) {
	var out ToolResult
	_, err := s.Wait(ctx, func(r Request) bool {
		for _, res := range r.Results {
			s.mu.Lock()
			st, ok := s.calledIDs[res.CallID]
			s.mu.Unlock()
			if ok && st == step {
				out = res
				return true
			}
		}
		return false
	})
	return out, err
}

// Index is the position of r among the requests received (by arrival).
func (s *Server) Index(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.reqs {
		if s.reqs[i].Time.Equal(r.Time) && s.reqs[i].Path == r.Path {
			return i
		}
	}
	return -1
}

// record stores r and wakes waiters.
func (s *Server) record(r Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	close(s.cond)
	s.cond = make(chan struct{})
	s.mu.Unlock()
}

// take returns the step for request r, which carries turns messages,
// with the CLI's name of the tool it calls, or -1 and a plain answer for
// a request that offers no tools, comes after the script, or does not
// offer the next step's tool (the CLI may still be connecting its MCP
// servers: the step waits for a later request).
func (s *Server) take(r *Request, turns int) (int, Step, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.Tools) == 0 {
		return -1, Say("ok"), ""
	}
	turn := fmt.Sprintf("%d\x00%s", turns, r.Prompt)
	for _, res := range r.Results {
		turn += "\x00" + res.CallID
	}
	i := s.next
	if s.next > 0 && turn == s.lastTurn {
		i = s.lastStep // the same request again
	} else if s.next >= len(s.script) {
		return -1, Say("ok"), ""
	}
	st := s.script[i]
	name := ""
	if st.Tool != "" {
		if name = matchTool(r.Tools, st.Tool); name == "" {
			return -1, Say("the tool " + st.Tool + " is not offered yet"), ""
		}
	}
	if i == s.next {
		s.next++
	}
	s.lastTurn, s.lastStep = turn, i
	return i, st, name
}

// callID makes a fresh call id for step i.
func (s *Server) callID(prefix string, step int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	id := fmt.Sprintf("%s%d", prefix, s.calls)
	s.calledIDs[id] = step
	return id
}

// maxBody bounds what one request may carry (the CLIs send the whole
// history and every tool's schema each turn).
const maxBody = 32 << 20

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := req.URL.Path
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 1})
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		s.anthropic(w, req, body)
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		s.openai(w, req, body)
	case req.Method == http.MethodPost && strings.Contains(path, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": 1})
	case req.Method == http.MethodPost && (strings.Contains(path, ":streamGenerateContent") || strings.Contains(path, ":generateContent")):
		s.gemini(w, req, body)
	default:
		// Model lists, telemetry, update checks: nothing a test scripts.
		s.record(Request{Path: path, Header: req.Header.Clone(), Body: body, Step: -1, Time: time.Now()})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"type":"not_found_error","message":"not scripted","status":"NOT_FOUND"}}`)
	}
}

// matchTool returns the offered tool that name designates, or "".
func matchTool(offered []string, name string) string {
	for _, t := range offered {
		if t == name {
			return t
		}
	}
	for _, t := range offered {
		if strings.HasSuffix(t, "__"+name) {
			return t
		}
	}
	for _, t := range offered {
		if strings.HasSuffix(t, "."+name) || geminiMCPName(t) == name {
			return t
		}
	}
	return ""
}

// geminiMCPName is NAME of Gemini CLI's mcp_SERVER_NAME (a server name
// without "_", as stem's), or "".
func geminiMCPName(t string) string {
	rest, ok := strings.CutPrefix(t, "mcp_")
	if !ok {
		return ""
	}
	_, name, _ := strings.Cut(rest, "_")
	return name
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name may be empty (Gemini sends data lines only).
func (e *sse) event(name string, data any) {
	b, _ := json.Marshal(data)
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if e.f != nil {
		e.f.Flush()
	}
}

// textOf flattens the content shapes the APIs use for text (a string, or
// a list of parts with "text") into one string.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if t := textOf(p); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case map[string]any:
		if t, ok := x["text"].(string); ok {
			return t
		}
		if c, ok := x["content"]; ok {
			return textOf(c)
		}
		if o, ok := x["output"]; ok {
			return textOf(o)
		}
		if p, ok := x["parts"]; ok {
			return textOf(p)
		}
	}
	return ""
}
