package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
)

// Source is the class's open sessions with the students' gates, as
// class.Hub keeps them: the dashboard reads and acts only through its
// forwarded calls, so each student's grant decides what it gets and the
// student's gate audits what it does.
type Source interface {
	// Call forwards a tool call to the student's gate (class.Hub.Call).
	Call(ctx context.Context, student, tool string, args map[string]any) (*mcp.CallToolResult, error)
	// Grant is the open session's level and tools; ok is false without one.
	Grant(student string) (level string, tools []string, ok bool)
	// StatusOf is the student's status row (over the open session if any).
	StatusOf(ctx context.Context, student string) (class.Row, error)
	// Since is the class's events after seq, waiting up to wait.
	Since(ctx context.Context, seq int64, wait time.Duration) []class.Event
	// Links is each student's session state.
	Links() []class.Link
}

// texts is a forwarded result's text contents (the JSON, then a body);
// an error result is an error.
func texts(tool string, res *mcp.CallToolResult) ([]string, error) {
	var out []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			out = append(out, tc.Text)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: an empty answer", tool)
	}
	if res.IsError {
		// A forwarded error is {"text": ..., "student", "notice"}.
		var e struct{ Text string }
		if json.Unmarshal([]byte(out[0]), &e) == nil && e.Text != "" {
			return nil, fmt.Errorf("%s: %s", tool, oneLine(e.Text))
		}
		return nil, fmt.Errorf("%s: %s", tool, oneLine(out[0]))
	}
	return out, nil
}

// call forwards a call and decodes its JSON into v (when not nil); it
// returns the text contents.
func call(ctx context.Context, src Source, student, tool string, args map[string]any, v any) ([]string, error) {
	res, err := src.Call(ctx, student, tool, args)
	if err != nil {
		return nil, err
	}
	out, err := texts(tool, res)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out[0]), v); err != nil {
			return nil, fmt.Errorf("%s: not the answer expected: %v", tool, err)
		}
	}
	return out, nil
}

// pane is pane_list's pane as the dashboard uses it.
type pane struct {
	ID           string `json:"id"`
	WindowIndex  int    `json:"window_index"`
	WindowName   string `json:"window_name"`
	Title        string `json:"title"`
	Command      string `json:"command"`
	Active       bool   `json:"active"`
	WindowActive bool   `json:"window_active"`
	Dead         bool   `json:"dead"`
	Allow        string `json:"stem_allow"`
	Role         string `json:"stem_role"`
}

func (p pane) allowed() bool {
	switch strings.ToLower(p.Allow) {
	case "1", "on", "yes", "true":
		return true
	}
	return false
}

func listPanes(ctx context.Context, src Source, student string) ([]pane, error) {
	var list struct {
		Panes []pane `json:"panes"`
	}
	if _, err := call(ctx, src, student, "pane_list", map[string]any{}, &list); err != nil {
		return nil, err
	}
	return list.Panes, nil
}

// activePane is the active pane of the active window (else the first).
func activePane(panes []pane) (string, error) {
	if len(panes) == 0 {
		return "", errors.New("the student's tmux has no pane")
	}
	for _, p := range panes {
		if p.Active && p.WindowActive {
			return p.ID, nil
		}
	}
	return panes[0].ID, nil
}

// capture is a pane's visible screen with its colours.
func capture(ctx context.Context, src Source, student, pane string) (string, error) {
	out, err := call(ctx, src, student, "pane_capture", map[string]any{"pane": pane, "escapes": true, "join": false, "max_bytes": captureBytes}, nil)
	if err != nil {
		return "", err
	}
	if len(out) < 2 {
		return "", nil
	}
	return out[1], nil
}

// captureBytes bounds one screen.
const captureBytes = 64 << 10

// eventLine is an event as a tile's or the timeline's line says it.
func eventLine(e class.Event) string {
	parts := []string{e.Time.Local().Format("15:04:05"), e.Type}
	for _, p := range []string{e.Pane, e.Role, e.Action, e.Signal} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if e.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit %d", *e.ExitCode))
	}
	if e.GDB != nil {
		for _, k := range []string{"reason", "func", "file", "line"} {
			if v := e.GDB[k]; v != "" {
				parts = append(parts, k+"="+v)
			}
		}
	}
	return oneLine(strings.Join(parts, " "))
}
