package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// These tests run stemctl, stem-mcp and the test provider (a small MCP
// client, internal/agent/testdata/mcpclient) as built binaries against real
// Podman containers of the profile images, in a private account.

func repoRoot() string { return testenv.RepoRoot() }

func TestMain(m *testing.M) {
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// bins builds stemctl, stem-mcp (static, it is mounted into containers) and
// the test provider once per test process.
func bins(t testing.TB) string {
	t.Helper()
	testenv.RequireAccount(t) // before the builds, which -short would waste
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	return testenv.Binary(t, "mcpclient", "./internal/agent/testdata/mcpclient")
}

// account is a private student account (testenv.Account) whose agents.toml
// names the test provider.
type account struct {
	*testenv.Account
	t       testing.TB
	reports string
}

func newAccount(t testing.TB) *account { return newAccountIn(t, "/tmp") }

// newAccountIn puts the runtime directory (sockets, agents' files) under
// parent: the repository's .cache for Gemini, which ignores settings under
// world-writable directories such as /tmp.
func newAccountIn(t testing.TB, parent string) *account {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real containers (skipped with -short)")
	}
	bin := bins(t)
	a := &account{Account: testenv.NewAccount(t, bin, testenv.AccountOptions{RuntimeParent: parent}), t: t}
	a.reports = filepath.Join(a.Base, "reports")
	os.MkdirAll(a.reports, 0o700)
	client := filepath.Join(bin, "mcpclient")
	// The provider runs in the agent's sandbox: it writes its report in
	// its own home there (the agent directory with --here).
	report := "{home}/report.json"
	cfg := fmt.Sprintf(`# the test provider: a small MCP client (internal/agent/testdata/mcpclient)
[providers.custom]
command = [%q, "--report", %q, "--above", "gdb_break"]

[providers.helper]
command = [%q, "--report", %q]
`, client, report, client, report)
	if err := os.WriteFile(filepath.Join(a.Base, "config", agentcli.ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}

type result = testenv.Result

func (a *account) run(args ...string) (result, error) { return a.Run(nil, args...) }

func (a *account) runEnv(extra []string, args ...string) (result, error) {
	return a.Run(extra, args...)
}

// must runs stemctl and requires success.
func (a *account) must(args ...string) string {
	a.t.Helper()
	r, err := a.run(args...)
	if err != nil || r.Code != 0 {
		a.t.Fatalf("stemctl %s: exit %d %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (a *account) mustJSON(v any, args ...string) {
	a.t.Helper()
	out := a.must(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		a.t.Fatalf("stemctl %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// instanceInfo is what the tests need from `stemctl status --json`.
type instanceInfo struct {
	Record struct {
		Instance    string `json:"instance"`
		ContainerID string `json:"container_id"`
		SocketDir   string `json:"socket_dir"`
		CardPath    string `json:"card_path"`
	} `json:"record"`
	State string `json:"state"`
	Tmux  bool   `json:"tmux_answers"`
	Nvim  bool   `json:"nvim_answers"`
}

func (a *account) status(inst string) instanceInfo {
	a.t.Helper()
	var st instanceInfo
	a.mustJSON(&st, "status", inst)
	return st
}

// tmux runs a host tmux command on an instance's server.
func (a *account) tmux(st instanceInfo, args ...string) string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As the account's user: a rootless student's tmux (in its user
	// namespace) takes clients of that user only.
	out, err := a.Command(ctx, "tmux", append([]string{"-S", filepath.Join(st.Record.SocketDir, "t.sock")}, args...)...).CombinedOutput()
	if err != nil {
		a.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (a *account) capture(st instanceInfo, pane string) string {
	return a.tmux(st, "capture-pane", "-p", "-J", "-S", "-200", "-t", pane)
}

// waitPane waits until a pane shows want.
func (a *account) waitPane(st instanceInfo, pane, want string, d time.Duration) string {
	a.t.Helper()
	deadline := time.Now().Add(d)
	var text string
	for time.Now().Before(deadline) {
		text = a.capture(st, pane)
		if strings.Contains(text, want) {
			return text
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("pane %s never showed %q; it shows:\n%s", pane, want, text)
	return ""
}

// report is what the test provider writes.
type report struct {
	Env           map[string]string `json:"env"`
	Cwd           string            `json:"cwd"`
	Rows          int               `json:"rows"`
	Cols          int               `json:"cols"`
	IsTTY         bool              `json:"is_tty"`
	ContextText   string            `json:"context_text"`
	MCPCommand    []string          `json:"mcp_command"`
	Started       int64             `json:"started_unix_nano"`
	FirstCall     int64             `json:"first_call_unix_nano"`
	ServerVersion string            `json:"server_version"`
	Tools         []string          `json:"tools"`
	SessionStatus map[string]any    `json:"session_status"`
	ContextResrc  map[string]any    `json:"context_resource"`
	AboveLevel    string            `json:"above_level_tool"`
	AboveLevelErr string            `json:"above_level_error"`
	Error         string            `json:"error"`
}

func (a *account) waitReport(id string, d time.Duration) report {
	a.t.Helper()
	agentDir := filepath.Join(a.Runtime, "stem", "agents", id)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(filepath.Join(agentDir, "home", "report.json"))
		if err != nil {
			data, err = os.ReadFile(filepath.Join(agentDir, "report.json"))
		}
		if err == nil {
			p := filepath.Join(agentDir, "report.json")
			var r report
			if err := json.Unmarshal(data, &r); err != nil {
				a.t.Fatalf("report %s: %v", p, err)
			}
			if r.Error != "" {
				a.t.Fatalf("the test provider failed: %s", r.Error)
			}
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.t.Fatalf("agent %s wrote no report within %s", id, d)
	return report{}
}

func (a *account) agents() []agentstore.Status {
	a.t.Helper()
	var sts []agentstore.Status
	a.mustJSON(&sts, "agent", "list")
	return sts
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

// mcpSession is an MCP client (mcp-go) of stem-mcp on one instance, the
// way an agent's CLI would run it, collecting session events.
type mcpSession struct {
	t      testing.TB
	c      *client.Client
	mu     sync.Mutex
	events []sessionEvent
	ch     chan sessionEvent
}

type sessionEvent struct {
	Type     string         `json:"type"`
	Time     time.Time      `json:"time"`
	Pane     string         `json:"pane"`
	Role     string         `json:"role"`
	Action   string         `json:"action"`
	ExitCode *int           `json:"exit_code"`
	Signal   string         `json:"signal"`
	GDB      map[string]any `json:"gdb"`
	received time.Time
}

func (a *account) mcp(inst, level string) *mcpSession {
	a.t.Helper()
	c, err := client.NewStdioMCPClient(filepath.Join(bins(a.t), "stem-mcp"), a.Env, "serve", "--level", level, "--instance", inst)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { c.Close() })
	s := &mcpSession{t: a.t, c: c, ch: make(chan sessionEvent, 256)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		now := time.Now()
		if n.Method != string(mcp.MethodNotificationMessage) {
			return
		}
		data, _ := json.Marshal(n.Params.AdditionalFields)
		var m struct {
			Logger string       `json:"logger"`
			Data   sessionEvent `json:"data"`
		}
		if json.Unmarshal(data, &m) != nil || m.Logger != "stem.events" {
			return
		}
		m.Data.received = now
		s.mu.Lock()
		s.events = append(s.events, m.Data)
		s.mu.Unlock()
		select {
		case s.ch <- m.Data:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// NewStdioMCPClient starts only the transport; Start installs the
	// notification dispatch (without it OnNotification handlers never run).
	if err := c.Start(ctx); err != nil {
		a.t.Fatalf("start the MCP client: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stem-agent-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		a.t.Fatalf("initialize: %v", err)
	}
	return s
}

// call invokes a tool that must succeed and returns its JSON result.
func (s *mcpSession) call(name string, args map[string]any) map[string]any {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		s.t.Fatalf("%s(%v): %v", name, args, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		s.t.Fatalf("%s(%v): tool error: %s", name, args, text)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		s.t.Fatalf("%s: not JSON: %v\n%s", name, err, text)
	}
	return out
}

// drain forgets the events received so far.
func (s *mcpSession) drain() {
	for {
		select {
		case <-s.ch:
		default:
			return
		}
	}
}

// next waits for an event of one of the types.
func (s *mcpSession) next(d time.Duration, types ...string) sessionEvent {
	s.t.Helper()
	return s.nextWhere(d, func(sessionEvent) bool { return true }, types...)
}

// nextWhere waits for an event of one of the types that ok accepts.
func (s *mcpSession) nextWhere(d time.Duration, ok func(sessionEvent) bool, types ...string) sessionEvent {
	s.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-s.ch:
			for _, ty := range types {
				if ev.Type == ty && ok(ev) {
					return ev
				}
			}
		case <-timer.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("no %v event within %s; events so far: %+v", types, d, s.events)
		}
	}
}

// path reads a nested value: path(m, "status", "frame", "func").
func path(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%g", x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func maxOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
