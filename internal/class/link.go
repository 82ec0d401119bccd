package class

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/sessionevent"
	"github.com/stem-edu/stem/internal/termtext"
)

// maxLine bounds one JSON-RPC message from a student's side.
const maxLine = 1 << 20

// mcpSession is one open MCP session with a student's gate over ssh.
type mcpSession struct {
	c      *client.Client
	cmd    *exec.Cmd
	stderr *capped
	wire   *wire
	once   sync.Once
}

// dialMCP starts ssh with args (its verb `mcp INSTANCE`) and does the MCP
// handshake within timeout. The session lives until close.
func dialMCP(ctx context.Context, ssh string, args []string, timeout time.Duration) (*mcpSession, error) {
	cmd := exec.Command(ssh, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// ssh's stdin is a pipe of our own so that every write to it can
	// have a deadline; Wait gives up on stderr a little after ssh ends.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("a pipe for ssh: %w", err)
	}
	cmd.Stdin = inR
	cmd.WaitDelay = time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	s := &mcpSession{cmd: cmd, stderr: &capped{max: maxStderr}}
	cmd.Stderr = s.stderr
	err = cmd.Start()
	inR.Close()
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	s.wire = newWire(inW, stdout)
	s.c = client.NewClient(s.wire)
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
		return nil, s.fail("MCP handshake", err)
	}
	return s, nil
}

// explain prefers why the teacher's side ended the link (cut off, or the
// student stopped answering), then adds what ssh or the gate said on
// stderr.
func (s *mcpSession) explain(err error) error {
	if e := s.wire.Err(); e != nil && (errors.Is(e, errCutOff) || errors.Is(e, errSilent)) {
		return e
	}
	if msg := strings.TrimSpace(s.stderr.String()); msg != "" {
		return fmt.Errorf("%w; ssh's last line (quoted, from the student's side): %q", err, clean(lastLine(msg)))
	}
	return err
}

// StudentError is an error the student's side answered a call with. Said
// is its text, cleaned and bounded: the student's data, which the
// teacher's side quotes and never words as its own.
type StudentError struct {
	What string // the call: "tools/list", "pane_list", ...
	Said string
}

func (e *StudentError) Error() string {
	return fmt.Sprintf("%s: the student's side answered with an error (quoted): %q", e.What, e.Said)
}

// fail is err of a call what: the transport's own (a deadline, a cut-off,
// ssh gone) explained, anything else the student's side's answer.
func (s *mcpSession) fail(what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return s.explain(fmt.Errorf("%s: %w", what, err))
	}
	if e := s.wire.Err(); e != nil {
		return s.explain(fmt.Errorf("%s: %w", what, e))
	}
	return &StudentError{What: what, Said: termtext.Line(err.Error(), maxSaid)}
}

// close ends the session: ssh and its ProxyCommand, as a group. Nothing
// here waits on the student's side: the group is killed first and Wait's
// WaitDelay bounds the rest.
func (s *mcpSession) close() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		if s.wire != nil {
			s.wire.Close()
		}
		s.cmd.Wait()
	})
}

// studentEvent is session_events' event as the gate sends it. Its gdb
// part stays raw (this field hides the embedded one): whatever shape a
// student's gate gives it costs that part (flatGDB), never the event.
type studentEvent struct {
	sessionevent.Event
	GDB json.RawMessage `json:"gdb"`
}

// events calls session_events(since, wait) on the student's gate.
func (s *mcpSession) events(ctx context.Context, since int64, wait time.Duration) ([]studentEvent, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "session_events"
	req.Params.Arguments = map[string]any{"since": since, "wait_ms": wait.Milliseconds()}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, s.fail("session_events", err)
	}
	var text string
	if len(res.Content) > 0 {
		if tc, ok := mcp.AsTextContent(res.Content[0]); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return nil, &StudentError{What: "session_events", Said: termtext.Line(text, maxSaid)}
	}
	var out struct {
		Events []studentEvent `json:"events"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, errors.New("session_events: the answer is not a list of events")
	}
	return out.Events, nil
}

// tools lists the tools the student's gate offers this session: its
// grant's level decides them.
func (s *mcpSession) tools(ctx context.Context) ([]string, error) {
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, s.fail("tools/list", err)
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
		return nil, s.fail(tool, err)
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
		return st, &StudentError{What: gateStatusTool, Said: termtext.Line(text, maxSaid)}
	}
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return st, fmt.Errorf("%s: the answer is not the gate's status", gateStatusTool)
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
