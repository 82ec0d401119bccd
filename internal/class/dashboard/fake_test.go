package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/levels"
)

// fakeSource stands in for class.Hub in the handler tests (the real hub
// with real students is in internal/cmd/class's serve test): each
// student's grant is a level with that level's real tool list, tools
// answer from canned texts, and every call is recorded.
type fakeSource struct {
	mu      sync.Mutex
	levels  map[string]string // student -> level; absent: not connected
	answers map[string][]string
	events  []class.Event
	calls   []fakeCall
	status  int          // StatusOf calls (each a gate_status line in the audit log)
	links   []class.Link // the hub's links; nil: a refused s3
}

type fakeCall struct {
	Student, Tool string
	Args          map[string]any
}

func newFake() *fakeSource {
	return &fakeSource{levels: map[string]string{}, answers: map[string][]string{}}
}

func (f *fakeSource) Call(ctx context.Context, student, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every call that reaches the source is recorded, refused or not:
	// the page's own checks must stop what the grant does not allow.
	f.calls = append(f.calls, fakeCall{student, tool, args})
	level, ok := f.levels[student]
	if !ok {
		return nil, &class.RefusedError{Msg: tool + " refused: no open session with student " + student}
	}
	if !slices.Contains(toolsOf(level), tool) {
		return nil, &class.RefusedError{Msg: fmt.Sprintf("%s refused: level %s", tool, level)}
	}
	texts, ok := f.answers[tool]
	if !ok {
		texts = []string{`{"ok":true}`}
	}
	res := &mcp.CallToolResult{}
	for i, t := range texts {
		if i == 0 { // as class.Hub marks it
			var m map[string]any
			if json.Unmarshal([]byte(t), &m) == nil {
				m["student"], m["notice"] = student, class.ForwardNotice(student)
				b, _ := json.Marshal(m)
				t = string(b)
			}
		}
		res.Content = append(res.Content, mcp.NewTextContent(t))
	}
	return res, nil
}

func toolsOf(level string) []string {
	l, err := levels.Parse(level)
	if err != nil {
		return nil
	}
	return levels.ToolNames(l)
}

func (f *fakeSource) Grant(student string) (string, []string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	level, ok := f.levels[student]
	return level, toolsOf(level), ok
}

func (f *fakeSource) StatusOf(ctx context.Context, student string) (class.Row, error) {
	f.mu.Lock()
	f.status++
	f.mu.Unlock()
	return class.Row{Student: student, Reach: class.ReachOK, Flags: []class.Flag{},
		Instances: []class.Instance{{Instance: "hello-1", State: "answers", Series: "demo", Card: "hello", Task: "1",
			Agents: []class.Agent{{Provider: "claude", Level: "assist", Started: time.Now()}}}}}, nil
}

func (f *fakeSource) Since(ctx context.Context, seq int64, wait time.Duration) []class.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []class.Event
	for _, e := range f.events {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out
}

func (f *fakeSource) Links() []class.Link {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.links != nil {
		return append([]class.Link(nil), f.links...)
	}
	return []class.Link{{Student: "s3", Error: "key-refused: the <b>grant</b> was revoked"}}
}

func (f *fakeSource) called(tool string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// studentFake is a student's session as the gate would answer it: two
// panes (one the student allows keys in), a buffer with a diagnostic,
// no debugger, and hostile text everywhere a student can put it.
func studentFake() *fakeSource {
	f := newFake()
	f.answers["pane_list"] = []string{`{"panes":[
		{"id":"%0","window_index":0,"window_name":"edit","command":"nvim","active":true,"window_active":false},
		{"id":"%3","window_index":1,"window_name":"<b>sh</b>","command":"bash","active":true,"window_active":true,"stem_allow":"1","title":"<img src=/canary>"}]}`}
	f.answers["pane_capture"] = []string{`{"pane":"%3"}`, hostile + "\nPANE-TEXT-42"}
	f.answers["nvim_status"] = []string{`{"status":{"mode":"n","buffer":2,"line":3,"file":{"text":"/card/t1/words.c"},"buffers":[{"number":2,"name":{"text":"/card/t1/words.c"},"modified":true}]}}`}
	f.answers["nvim_buffer_read"] = []string{`{"buffer":2,"first":1,"count":4,"total":4}`,
		"1\t#include <stdio.h>\n2\tint words(const char *s) {\n3\t\tfor (i = 0; i <= n; i++) /* <script>fetch('/canary')</script> */\n4\t}\n"}
	f.answers["nvim_diagnostics"] = []string{`{"diagnostics":{"items":[{"buffer":2,"line":3,"severity":"ERROR","message":{"text":"use of undeclared identifier 'i' <img src=/canary>"}}],"total":1}}`}
	f.answers["gdb_status"] = []string{`{"state":"no-debugger","message":"gdb is not running"}`}
	f.events = []class.Event{
		{Seq: 1, Student: "s1", Type: "build_failed", Action: "build", Time: time.Now()},
		{Seq: 2, Student: "s2", Type: "program_crashed", Signal: "SIGSEGV", Time: time.Now()},
		{Seq: 3, Student: "s1", Type: "program_crashed", Pane: "%3", Signal: "SIGSEGV <b>", Time: time.Now()},
	}
	return f
}
