package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/testenv"
)

// stemMCP is the binary under test: $STEM_MCP_BIN (make test sets it) or
// one built once for this test process.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func stemMCP(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("STEM_MCP_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "stem-mcp-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "stem-mcp")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/stem-mcp")
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build stem-mcp: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// session is one stem-mcp process with an initialized MCP client.
type session struct {
	t testing.TB
	*conn
}

// conn is a session's client and what it received; sub-tests share it.
type conn struct {
	c      *client.Client
	mu     sync.Mutex
	notes  []mcp.JSONRPCNotification
	noteCh chan mcp.JSONRPCNotification
}

// sub returns the session reporting failures to t (a sub-test).
func (s *session) sub(t testing.TB) *session { return &session{t: t, conn: s.conn} }

func connect(t testing.TB, in *testenv.Instance, level string, extra ...string) *session {
	t.Helper()
	args := append([]string{"serve", "--level", level}, extra...)
	c, err := client.NewStdioMCPClient(stemMCP(t), in.Env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &session{t: t, conn: &conn{c: c, noteCh: make(chan mcp.JSONRPCNotification, 256)}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		s.notes = append(s.notes, n)
		s.mu.Unlock()
		select {
		case s.noteCh <- n:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// NewStdioMCPClient starts only the transport; Start installs the
	// client's notification dispatch (without it OnNotification handlers
	// never run).
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start the MCP client: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stem-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return s
}

func (s *session) tools() []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// call invokes a tool; it returns the decoded structured result, the text
// of an error result, and a protocol error.
func (s *session) call(name string, args map[string]any) (map[string]any, string, error) {
	out, etext, _, err := s.callCoded(name, args)
	return out, etext, err
}

// callCoded is call with the error result's code (see codeOf).
func (s *session) callCoded(name string, args map[string]any) (map[string]any, string, errcode.Code, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, "", "", err
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		return nil, strings.Join(texts, ""), codeOf(s.t, res), nil
	}
	out, err := decodeResult(texts)
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return out, "", "", nil
}

// codeOf is the code of an error result as a client reads it from the
// wire: structuredContent.error.code, whose message must be the text.
func codeOf(t testing.TB, res *mcp.CallToolResult) errcode.Code {
	t.Helper()
	sc, _ := res.StructuredContent.(map[string]any)
	e, _ := sc["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || len(res.Content) != 1 {
		t.Fatalf("an error result without its code: %+v", res)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != msg {
		t.Fatalf("the code's message %q is not the text %+v", msg, res.Content[0])
	}
	return errcode.Code(code)
}

// refusedWith calls a tool that must be refused with code; it returns
// the message.
func (s *session) refusedWith(code errcode.Code, name string, args map[string]any) string {
	s.t.Helper()
	out, etext, got, err := s.callCoded(name, args)
	if err != nil {
		s.t.Fatalf("%s(%v): %v, want a tool error with code %s", name, args, err, code)
	}
	if etext == "" {
		s.t.Fatalf("%s(%v) succeeded, want a refusal with code %s: %v", name, args, code, out)
	}
	if got != code {
		s.t.Fatalf("%s(%v): code %s, want %s: %s", name, args, got, code, etext)
	}
	return etext
}

// ok calls a tool that must succeed.
func (s *session) ok(name string, args map[string]any) map[string]any {
	s.t.Helper()
	out, etext, err := s.call(name, args)
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	if etext != "" {
		s.t.Fatalf("%s: tool error: %s", name, etext)
	}
	return out
}

// refused calls a tool that must fail (tool error or protocol error) and
// returns the message.
func (s *session) refused(name string, args map[string]any) string {
	s.t.Helper()
	out, etext, err := s.call(name, args)
	if err != nil {
		return err.Error()
	}
	if etext == "" {
		s.t.Fatalf("%s(%v) succeeded, want a refusal: %v", name, args, out)
	}
	return etext
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// decodeResult checks a result's shape (fields as JSON in the first text
// content; student text, when there is some, alone in a second one, flagged
// by text_in_next_content) and returns the fields with that text as "text".
func decodeResult(texts []string) (map[string]any, error) {
	if len(texts) == 0 || len(texts) > 2 {
		return nil, fmt.Errorf("result has %d text contents, want 1 or 2", len(texts))
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(texts[0]), &out); err != nil {
		return nil, fmt.Errorf("result is not JSON: %v\n%s", err, texts[0])
	}
	flagged := out["text_in_next_content"] == true
	if flagged != (len(texts) == 2) {
		return nil, fmt.Errorf("text_in_next_content=%v with %d contents", out["text_in_next_content"], len(texts))
	}
	if _, dup := out["text"]; dup && flagged {
		return nil, fmt.Errorf("text both in the fields and in a second content")
	}
	if flagged {
		out["text"] = texts[1]
	}
	return out, nil
}
