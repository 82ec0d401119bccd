package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/xdg"
)

// resultCode is the code in a tool error's structured content, checked
// against its text: the message must be the text content.
func resultCode(t *testing.T, res *mcp.CallToolResult) errcode.Code {
	t.Helper()
	if res == nil || !res.IsError || len(res.Content) != 1 {
		t.Fatalf("not one tool error: %+v", res)
	}
	w, ok := res.StructuredContent.(errcode.Wire)
	if !ok {
		t.Fatalf("no error code in the structured content: %#v", res.StructuredContent)
	}
	if text := res.Content[0].(mcp.TextContent).Text; w.Error.Message != text {
		t.Fatalf("the message %q is not the text %q", w.Error.Message, text)
	}
	if _, known := errcode.Lookup(w.Error.Code); !known {
		t.Fatalf("code %q is not in the table", w.Error.Code)
	}
	return w.Error.Code
}

// The sites that refuse the client's arguments give each refusal its own
// code, and the words stay what they were.
func TestInputRefusalsHaveTheirCodes(t *testing.T) {
	t.Parallel()
	cf := newCardFixture(t)
	for p, want := range map[string]errcode.Code{
		"../outside/secret.txt": errcode.OutsideCard,
		"t1/leak.c":             errcode.OutsideCard, // a symlink out
		cf.secret:               errcode.OutsideCard,
		"t1/nope.c":             errcode.BadInput,
		"t1/\n.c":               errcode.BadInput,
	} {
		_, err := resolveCardPath(cf.root, p, true)
		if got := errcode.Of(asInput(err)); got != want {
			t.Errorf("path %q: %v: code %s, want %s", p, err, got, want)
		}
	}
	const cid, srv = "0123456789abcdef0123", "/run/stem/tmux-1"
	pane := tmux.PaneID("%3")
	for cursor, want := range map[string]errcode.Code{
		makeCursor("fedcba9876543210fedc", srv, pane, 5): errcode.Stale,
		makeCursor(cid, "/run/stem/tmux-2", pane, 5):     errcode.Stale,
		makeCursor(cid, srv, "%4", 5):                    errcode.BadInput,
		"c1:x:5":                                         errcode.BadInput,
		"garbage":                                        errcode.BadInput,
	} {
		if _, err := parseCursor(cursor, cid, srv, pane); errcode.Of(err) != want {
			t.Errorf("cursor %q: %v: want %s", cursor, err, want)
		}
	}
	if _, err := parseCursor(makeCursor(cid, srv, pane, 5), cid, srv, pane); err != nil {
		t.Errorf("a good cursor: %v", err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"lines": []any{"a", "b", "c"}, "big": []any{strings.Repeat("x", 100)}, "n": "x"}
	if _, _, err := optStrings(req, "lines", 2, 1000); errcode.Of(err) != errcode.TooLarge {
		t.Errorf("too many lines: %v", err)
	}
	if _, _, err := optStrings(req, "big", 2, 50); errcode.Of(err) != errcode.TooLarge {
		t.Errorf("too many bytes: %v", err)
	}
	if _, err := optInt(req, "n", 0, 0, 9); errcode.Of(err) != errcode.BadInput {
		t.Errorf("not a number: %v", err)
	}
	// What the client reads is unchanged: the tool, "refused", the reason,
	// and that nothing was changed.
	res := toolError("nvim_buffer_read", asInput(errcode.Errorf(errcode.OutsideCard, "path %q leaves the card repository", "../x")))
	if got := resultCode(t, res); got != errcode.OutsideCard ||
		res.Content[0].(mcp.TextContent).Text != `nvim_buffer_read refused: path "../x" leaves the card repository (nothing was changed)` {
		t.Errorf("%s: %q", got, res.Content[0].(mcp.TextContent).Text)
	}
}

// Failures of the instance and its parts carry codes that say which; a
// deadline stays a timeout.
func TestFailureCodes(t *testing.T) {
	t.Parallel()
	rec := registry.Record{Instance: "native-amd64-demo-hello-t1"}
	for _, tc := range []struct {
		err  error
		want errcode.Code
		text string
	}{
		{verifyCode(&verify.Error{Check: "selection", Err: errors.New("no selection")}), errcode.NoInstance, ""},
		{verifyCode(&verify.Error{Check: "registry", Err: errors.New("no instance x")}), errcode.NoInstance, ""},
		{verifyCode(&verify.Error{Instance: rec.Instance, Check: "container", Err: errors.New("container is exited, not running")}), errcode.InstanceDown, ""},
		{verifyCode(&verify.Error{Instance: rec.Instance, Check: "tmux", Err: errors.New("no server")}), errcode.InstanceDown, ""},
		{verifyCode(&verify.Error{Instance: rec.Instance, Check: "label", Err: errors.New("wrong label")}), errcode.Unverified, ""},
		{verifyCode(&verify.Error{Instance: rec.Instance, Check: "socket-dir", Err: errors.New("not ours")}), errcode.Unverified, ""},
		{verifyCode(&verify.Error{Instance: rec.Instance, Check: "tmux", Err: context.DeadlineExceeded}), errcode.Timeout, "pane_list: timed out"},
		{tmuxDown(rec, errors.New("control client ended")), errcode.PartDown, "pane_list: tmux (the student's terminal session) does not answer"},
		{(&Server{}).explainPart(fmt.Errorf("read: %w", nvim.ErrBlocked)), errcode.EditorBusy, "pane_list: read: neovim is waiting for input"},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), errcode.Timeout, "pane_list: timed out"},
		{errors.New("something broke"), errcode.Internal, "pane_list: something broke"},
		{policyRefusal("pane_send_keys is not allowed by the task's agent policy"), errcode.PolicyRefused, "pane_list refused: pane_send_keys is not allowed"},
		{errcode.New(errcode.NotGranted, &notGrantedError{instance: "x", allowed: []string{"y"}}), errcode.NotGranted, "pane_list refused: instance x is not among the instances this access grant allows (y)"},
		{errcode.New(errcode.UnsafeCard, &unsafeCardError{errors.New("nested repository t1/sub")}), errcode.UnsafeCard, "pane_list refused: nothing was done: nested repository"},
	} {
		res := toolError("pane_list", tc.err)
		got := resultCode(t, res)
		text := res.Content[0].(mcp.TextContent).Text
		if got != tc.want || !strings.HasPrefix(text, tc.text) {
			t.Errorf("%v: code %s text %q; want %s %q", tc.err, got, text, tc.want, tc.text)
		}
		if errcode.IsRefusal(got) != isRefusal(tc.err) {
			t.Errorf("%v: the code and isRefusal disagree", tc.err)
		}
	}
	for _, err := range []error{nvim.ErrRefused, fmt.Errorf("x: %w", gdbmi.ErrNotRunning), fmt.Errorf("%w: %w", nvim.ErrUnavailable, os.ErrNotExist)} {
		pd := partOf(rec, err)
		if pd == nil {
			t.Fatalf("%v is not a part down", err)
		}
		if code := errcode.Of(errcode.New(errcode.PartDown, pd)); code != errcode.PartDown || isRefusal(pd) {
			t.Errorf("%v: %s", err, code)
		}
	}
}

// stdioClient is a server without Podman or an instance, spoken to over
// its stdio transport as a client would.
type stdioClient struct {
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func startStdio(t *testing.T, state string) *stdioClient {
	t.Helper()
	base := t.TempDir()
	dirs := &xdg.Dirs{Runtime: filepath.Join(base, "run"), State: state, Config: filepath.Join(base, "config"), Home: base}
	for _, d := range []string{dirs.Runtime, dirs.Config} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Level: Assist, Dirs: dirs, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	c.out.Buffer(nil, 1<<20)
	go func() {
		err := s.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		c.done <- err
	}()
	t.Cleanup(func() { inW.Close(); <-c.done; s.Close() })
	return c
}

// send writes one message; reply reads until the answer to id.
func (c *stdioClient) send(t *testing.T, m map[string]any) {
	t.Helper()
	m["jsonrpc"] = "2.0"
	data, _ := json.Marshal(m)
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (c *stdioClient) reply(t *testing.T, id int) map[string]any {
	t.Helper()
	for c.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", c.out.Text())
		}
		if n, ok := m["id"].(float64); ok && int(n) == id {
			return m
		}
	}
	t.Fatalf("no reply to %d: %v", id, c.out.Err())
	return nil
}

func (c *stdioClient) initialize(t *testing.T) {
	t.Helper()
	c.send(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.LATEST_PROTOCOL_VERSION, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	if r := c.reply(t, 1); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	c.send(t, map[string]any{"method": "notifications/initialized"})
}

// wireError is a tools/call reply's error code and text, as a client
// decodes them from the wire.
func wireError(t *testing.T, r map[string]any) (code, message, text string) {
	t.Helper()
	res, _ := r["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("not a tool error: %v", r)
	}
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		t.Fatalf("content: %v", res["content"])
	}
	text, _ = content[0].(map[string]any)["text"].(string)
	e, _ := res["structuredContent"].(map[string]any)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no structuredContent.error: %v", res)
	}
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message, text
}

// Over the wire (the fast encoder included), a call with nothing selected
// and arguments the schema refuses each carry their code, beside the text
// they always had.
func TestToolErrorsCarryTheirCodeOnTheWire(t *testing.T) {
	t.Parallel()
	c := startStdio(t, t.TempDir())
	c.initialize(t)
	for i, tc := range []struct {
		tool string
		args map[string]any
		code errcode.Code
		text string
	}{
		{"pane_list", map[string]any{}, errcode.NoInstance, "pane_list: no instance is selected: the student runs `stemctl mcp select INSTANCE`"},
		{"pane_capture", map[string]any{"pane": 7}, errcode.BadInput, "input schema validation failed: pane: got number, want string"},
		{"nvim_buffer_read", map[string]any{"buffer": 1, "level": "full"}, errcode.BadInput, "input schema validation failed: arguments: additional properties 'level' not allowed"},
	} {
		id := 10 + i
		c.send(t, map[string]any{"id": id, "method": "tools/call", "params": map[string]any{"name": tc.tool, "arguments": tc.args}})
		code, msg, text := wireError(t, c.reply(t, id))
		if code != string(tc.code) || msg != text || !strings.HasPrefix(text, tc.text) {
			t.Errorf("%s: code %q message %q text %q; want %s %q", tc.tool, code, msg, text, tc.code, tc.text)
		}
	}
}

// A session whose start cannot be audited refuses its calls with
// not_audited. (Over the wire a request that comes after the refusal is
// answered by the initialization hook, as a JSON-RPC error.)
func TestUnauditedSessionRefusesWithItsCode(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	s, err := New(Options{Level: Assist, Dirs: &xdg.Dirs{Runtime: base, State: base, Config: base, Home: base}, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.refuse(errors.New("the audit log cannot be written (audit.head: is a directory)"))
	var def toolDef
	for _, d := range allTools() {
		if d.tool.Name == "pane_list" {
			def = d
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "pane_list"
	res, err := s.call(context.Background(), []toolDef{def}, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resultCode(t, res); code != errcode.NotAudited || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "pane_list refused: the audit log cannot be written") {
		t.Errorf("code %s: %v", code, res.Content)
	}
}
