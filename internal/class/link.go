package class

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/gate/gatestatus"
)

// maxLine bounds one JSON-RPC message from a student's gate: the MCP
// client buffers a whole line before it decodes it.
const maxLine = 1 << 20

var errLineTooLong = errors.New("a message from the student's gate is longer than 1 MiB")

// lineLimit fails a read once a line has gone on past max bytes, so the
// reader above it never holds more.
type lineLimit struct {
	r   io.Reader
	max int
	cur int // bytes since the last newline
	err error
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			l.cur = 0
			continue
		}
		if l.cur++; l.cur > l.max {
			l.err = errLineTooLong
			return i, l.err
		}
	}
	return n, err
}

// mcpSession is one open MCP session with a student's gate over ssh.
type mcpSession struct {
	c      *client.Client
	cmd    *exec.Cmd
	stderr *capped
	lines  *lineLimit
	once   sync.Once
}

// dialMCP starts ssh with args (its verb `mcp INSTANCE`) and does the MCP
// handshake within timeout. The session lives until close.
func dialMCP(ctx context.Context, ssh string, args []string, timeout time.Duration) (*mcpSession, error) {
	cmd := exec.Command(ssh, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &mcpSession{cmd: cmd, stderr: &capped{max: maxStderr}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	s.lines = &lineLimit{r: stdout, max: maxLine}
	s.c = client.NewClient(transport.NewIO(s.lines, stdin, io.NopCloser(strings.NewReader(""))))
	if err := s.c.Start(context.WithoutCancel(ctx)); err != nil {
		s.close()
		return nil, fmt.Errorf("start the MCP client: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stem-mcp class", Version: "1"}
	if _, err := s.c.Initialize(ictx, req); err != nil {
		s.close()
		return nil, s.explain(fmt.Errorf("MCP handshake: %w", err))
	}
	return s, nil
}

// explain adds what ssh or the gate said on stderr, and a too-long line.
func (s *mcpSession) explain(err error) error {
	if s.lines != nil && s.lines.err != nil {
		return s.lines.err
	}
	if msg := strings.TrimSpace(s.stderr.String()); msg != "" {
		return fmt.Errorf("%w: %s", err, clean(lastLine(msg)))
	}
	return err
}

// close ends the session: ssh and its ProxyCommand, as a group.
func (s *mcpSession) close() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		if s.c != nil {
			s.c.Close()
		}
		s.cmd.Wait()
	})
}

// studentEvent is session_events' event as the gate sends it.
type studentEvent struct {
	Seq      int64           `json:"seq"`
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	Instance string          `json:"instance"`
	Pane     string          `json:"pane"`
	Role     string          `json:"role"`
	Action   string          `json:"action"`
	ExitCode *int            `json:"exit_code"`
	Signal   string          `json:"signal"`
	GDB      json.RawMessage `json:"gdb"`
}

// events calls session_events(since, wait) on the student's gate.
func (s *mcpSession) events(ctx context.Context, since int64, wait time.Duration) ([]studentEvent, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "session_events"
	req.Params.Arguments = map[string]any{"since": since, "wait_ms": wait.Milliseconds()}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, s.explain(fmt.Errorf("session_events: %w", err))
	}
	var text string
	if len(res.Content) > 0 {
		if tc, ok := mcp.AsTextContent(res.Content[0]); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("session_events: %s", clean(text))
	}
	var out struct {
		Events []studentEvent `json:"events"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("session_events: the answer is not a list of events: %v", err)
	}
	return out.Events, nil
}

// tools lists the tools the student's gate offers this session: its
// grant's level decides them.
func (s *mcpSession) tools(ctx context.Context) ([]string, error) {
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, s.explain(fmt.Errorf("tools/list: %w", err))
	}
	names := make([]string, 0, len(res.Tools))
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// call calls a tool of the student's gate.
func (s *mcpSession) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, s.explain(fmt.Errorf("%s: %w", tool, err))
	}
	return res, nil
}

// status calls the gate's gate_status tool: the status verb's answer over
// the open session.
func (s *mcpSession) status(ctx context.Context) (gatestatus.Status, error) {
	var st gatestatus.Status
	res, err := s.call(ctx, gateStatusTool, nil)
	if err != nil {
		return st, err
	}
	text := firstText(res)
	if res.IsError {
		return st, fmt.Errorf("%s: %s", gateStatusTool, clean(text))
	}
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return st, fmt.Errorf("%s: the answer is not the gate's status: %v", gateStatusTool, err)
	}
	return st, nil
}

// gateStatusTool is the gate's status as a tool of its MCP session.
const gateStatusTool = "gate_status"

func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) > 0 {
		if tc, ok := mcp.AsTextContent(res.Content[0]); ok {
			return tc.Text
		}
	}
	return ""
}
