package dashboard

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
)

// maxLine bounds one message from a student's gate (the MCP client holds
// a whole line before it decodes it); a screen is at most 64 KiB.
const (
	maxLine      = 1 << 20
	captureBytes = 64 << 10
	paneRefresh  = 2 * time.Second
)

// lineLimit fails a read once a line goes on past max bytes.
type lineLimit struct {
	r   io.Reader
	max int
	cur int
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
		} else if l.cur++; l.cur > l.max {
			l.err = errors.New("a message from the student's gate is longer than 1 MiB")
			return i, l.err
		}
	}
	return n, err
}

// session is one MCP session with a student's gate over ssh.
type session struct {
	c    *client.Client
	cmd  *exec.Cmd
	once sync.Once

	pane   string
	paneAt time.Time
}

// dial starts ssh with args (the gate's `mcp INSTANCE`) and does the MCP
// handshake within timeout.
func dial(ctx context.Context, ssh string, args []string, timeout time.Duration) (*session, error) {
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
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	s := &session{cmd: cmd}
	s.c = client.NewClient(transport.NewIO(&lineLimit{r: stdout, max: maxLine}, stdin, io.NopCloser(strings.NewReader(""))))
	if err := s.c.Start(context.WithoutCancel(ctx)); err != nil {
		s.close()
		return nil, fmt.Errorf("start the MCP client: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stemctl class serve", Version: "1"}
	if _, err := s.c.Initialize(ictx, req); err != nil {
		s.close()
		return nil, fmt.Errorf("MCP handshake with the student's gate: %w", err)
	}
	return s, nil
}

// close ends ssh and its ProxyCommand, as a group.
func (s *session) close() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		s.c.Close()
		s.cmd.Wait()
	})
}

// call runs a tool and returns its text contents (the JSON, then a body).
func (s *session) call(ctx context.Context, name string, args map[string]any) ([]string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			out = append(out, tc.Text)
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s", name, oneLine(strings.Join(out, " ")))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: an empty answer", name)
	}
	return out, nil
}

// activePane is the active pane of the active window, listed again every
// paneRefresh (the student switches windows rarely; a capture is often).
func (s *session) activePane(ctx context.Context) (string, error) {
	if s.pane != "" && time.Since(s.paneAt) < paneRefresh {
		return s.pane, nil
	}
	out, err := s.call(ctx, "pane_list", map[string]any{})
	if err != nil {
		return "", err
	}
	var list struct {
		Panes []struct {
			ID           string `json:"id"`
			Active       bool   `json:"active"`
			WindowActive bool   `json:"window_active"`
		} `json:"panes"`
	}
	if err := json.Unmarshal([]byte(out[0]), &list); err != nil {
		return "", fmt.Errorf("pane_list: not a list of panes: %v", err)
	}
	if len(list.Panes) == 0 {
		return "", errors.New("the student's tmux has no pane")
	}
	pane := list.Panes[0].ID
	for _, p := range list.Panes {
		if p.Active && p.WindowActive {
			pane = p.ID
			break
		}
	}
	s.pane, s.paneAt = pane, time.Now()
	return pane, nil
}

// capture is the pane's visible screen with its colours.
func (s *session) capture(ctx context.Context, pane string) (string, error) {
	out, err := s.call(ctx, "pane_capture", map[string]any{"pane": pane, "escapes": true, "join": false, "max_bytes": captureBytes})
	if err != nil {
		s.pane = "" // the pane may be gone: list again
		return "", err
	}
	if len(out) < 2 {
		return "", nil
	}
	return out[1], nil
}

// event is session_events' event as the gate sends it.
type event struct {
	Seq      int64     `json:"seq"`
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Pane     string    `json:"pane"`
	Role     string    `json:"role"`
	Action   string    `json:"action"`
	ExitCode *int      `json:"exit_code"`
	Signal   string    `json:"signal"`
}

// events takes the events after since, without waiting.
func (s *session) events(ctx context.Context, since int64) ([]event, error) {
	out, err := s.call(ctx, "session_events", map[string]any{"since": since, "wait_ms": 0})
	if err != nil {
		return nil, err
	}
	var evs struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal([]byte(out[0]), &evs); err != nil {
		return nil, fmt.Errorf("session_events: not a list of events: %v", err)
	}
	return evs.Events, nil
}
