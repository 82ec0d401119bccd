// Package mcptest runs stem-mcp in process, over mcp-go's in-process
// transport, against fakes of the student's tmux, Neovim and gdb that hold
// panes, buffers and a debugger in memory and record what was sent to
// them. The instance's verification runs for real (registry record,
// socket directory, container.json, an engine's answer: the fake engine of
// package enginetest), and so do the audit log, the host's consent record,
// the task's policy and the card checks: only the three servers are
// replaced. A tool's logic is tested here in milliseconds with only Go;
// the suites on real instances (package mcpserver) keep the fakes
// faithful.
package mcptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
)

// Tmux is a fake tmux server: panes with text, and a record of the keys
// and commands sent. Its methods are safe for concurrent use.
type Tmux struct {
	mu       sync.Mutex
	panes    []tmux.Pane
	text     map[tmux.PaneID][]string
	sent     []Sent
	runs     []Sent
	nextID   int
	done     chan struct{}
	closed   bool
	serverID string
	// RunFunc answers pane_run and task_action (the command's output and
	// exit code); nil: no output, exit 0.
	RunFunc func(pane tmux.PaneID, command string) (tmux.RunResult, error)
}

// Sent is keys typed into, or a command run in, a pane.
type Sent struct {
	Pane tmux.PaneID
	// Keys as ParseKeys gave them (SendKeys), or the command (Run).
	Keys    []tmux.Key
	Command string
}

// NewTmux returns a server with the panes a task's session starts with:
// %0 (window "edit", Neovim) and %1 (window "shell", bash).
func NewTmux() *Tmux {
	var id [4]byte
	rand.Read(id[:])
	t := &Tmux{text: map[tmux.PaneID][]string{}, done: make(chan struct{}), serverID: hex.EncodeToString(id[:])}
	t.AddPane("edit", "nvim", "editor")
	t.AddPane("shell", "bash", "shell", "student$ ")
	return t
}

// AddPane adds a pane in a new window and returns its id.
func (t *Tmux) AddPane(window, command, role string, lines ...string) tmux.PaneID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addLocked(window, command, role, lines)
}

func (t *Tmux) addLocked(window, command, role string, lines []string) tmux.PaneID {
	id := tmux.PaneID(fmt.Sprintf("%%%d", t.nextID))
	t.panes = append(t.panes, tmux.Pane{ID: id, SessionID: "$0", SessionName: "stem", WindowID: tmux.WindowID(fmt.Sprintf("@%d", t.nextID)),
		WindowIndex: t.nextID, WindowName: window, Command: command, Width: 160, Height: 48, Active: true, DeadStatus: -1, Role: role})
	t.nextID++
	t.text[id] = append([]string(nil), lines...)
	return id
}

// SetText replaces a pane's lines (screen and scrollback alike).
func (t *Tmux) SetText(p tmux.PaneID, lines ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.text[p] = append([]string(nil), lines...)
}

// SetOption sets a pane option as a program in the container can
// (@stem_allow, @stem_role).
func (t *Tmux) SetOption(p tmux.PaneID, name, value string) {
	t.SetPaneOption(context.Background(), p, name, value)
}

// Sent returns the keys typed so far, oldest first.
func (t *Tmux) Sent() []Sent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Sent(nil), t.sent...)
}

// Runs returns the commands run so far, oldest first.
func (t *Tmux) Runs() []Sent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Sent(nil), t.runs...)
}

// Kill ends the server as a container stopping does: the control
// connection's Done closes and every call fails with tmux.ErrClosed.
func (t *Tmux) Kill() { t.Close() }

func (t *Tmux) Done() <-chan struct{} { return t.done }

func (t *Tmux) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
	return nil
}

func (t *Tmux) ServerID() string { return t.serverID }

// pane finds p; t.mu is held.
func (t *Tmux) pane(p tmux.PaneID) (int, error) {
	if t.closed {
		return -1, fmt.Errorf("%w (fake server killed)", tmux.ErrClosed)
	}
	for i := range t.panes {
		if t.panes[i].ID == p {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: %s", tmux.ErrNoPane, p)
}

func (t *Tmux) ListPanes(context.Context) ([]tmux.Pane, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("%w (fake server killed)", tmux.ErrClosed)
	}
	out := append([]tmux.Pane(nil), t.panes...)
	for i := range out {
		out[i].CursorY = max(0, len(t.text[out[i].ID])-1)
	}
	return out, nil
}

func (t *Tmux) PaneInfo(_ context.Context, p tmux.PaneID) (tmux.Pane, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, err := t.pane(p)
	if err != nil {
		return tmux.Pane{}, err
	}
	return t.panes[i], nil
}

// position: every line is on the screen (no scrollback); t.mu is held.
func (t *Tmux) position(p tmux.PaneID) tmux.Position {
	return tmux.Position{CursorY: max(0, len(t.text[p])-1), Height: 48, HistoryLimit: 2000}
}

func (t *Tmux) PanePosition(_ context.Context, p tmux.PaneID) (tmux.Position, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.pane(p); err != nil {
		return tmux.Position{}, err
	}
	return t.position(p), nil
}

// Capture returns the lines asked for; a size cap keeps the newest text,
// as the real client does.
func (t *Tmux) Capture(_ context.Context, p tmux.PaneID, opt tmux.CaptureOptions) (tmux.CaptureResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.pane(p); err != nil {
		return tmux.CaptureResult{}, err
	}
	lines := t.text[p]
	if r := opt.Range; r != nil {
		start, end := max(r.Start, 0), min(r.End, len(lines)-1)
		if start > end {
			lines = nil
		} else {
			lines = lines[start : end+1]
		}
	}
	res := tmux.CaptureResult{Text: strings.Join(lines, "\n")}
	if opt.MaxBytes > 0 && len(res.Text) > opt.MaxBytes {
		res.Text, res.Truncated = res.Text[len(res.Text)-opt.MaxBytes:], true
	}
	if opt.Position {
		pos := t.position(p)
		res.Position = &pos
	}
	return res, nil
}

// Wait matches the pane's current text; with nothing matched it reports
// the pane quiet when asked to wait for quiet, else times out at once
// (the fake's text does not change on its own).
func (t *Tmux) Wait(_ context.Context, p tmux.PaneID, opt tmux.WaitOptions) (tmux.WaitResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.pane(p); err != nil {
		return tmux.WaitResult{}, err
	}
	text := strings.Join(t.text[p], "\n")
	if opt.Pattern != nil {
		if loc := opt.Pattern.FindStringIndex(text); loc != nil {
			return tmux.WaitResult{Matched: true, Match: text[loc[0]:loc[1]]}, nil
		}
	}
	if opt.Quiet > 0 {
		return tmux.WaitResult{Quiet: true, Elapsed: opt.Quiet}, nil
	}
	return tmux.WaitResult{Elapsed: opt.Timeout}, tmux.ErrTimeout
}

func (t *Tmux) SendKeys(_ context.Context, p tmux.PaneID, keys []tmux.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.pane(p); err != nil {
		return err
	}
	t.sent = append(t.sent, Sent{Pane: p, Keys: append([]tmux.Key(nil), keys...)})
	return nil
}

func (t *Tmux) RunWithOptions(ctx context.Context, p tmux.PaneID, command string, _ tmux.RunOptions) (tmux.RunResult, error) {
	t.mu.Lock()
	if _, err := t.pane(p); err != nil {
		t.mu.Unlock()
		return tmux.RunResult{}, err
	}
	t.runs = append(t.runs, Sent{Pane: p, Command: command})
	fn := t.RunFunc
	t.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return tmux.RunResult{}, err
	}
	if fn == nil {
		return tmux.RunResult{Duration: time.Millisecond}, nil
	}
	return fn(p, command)
}

func (t *Tmux) NewWindow(_ context.Context, opt tmux.NewWindowOptions) (tmux.NewPane, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return tmux.NewPane{}, tmux.ErrClosed
	}
	id := t.addLocked(opt.Name, "bash", "", nil)
	return tmux.NewPane{Pane: id, Window: t.panes[len(t.panes)-1].WindowID}, nil
}

func (t *Tmux) SetPaneOption(_ context.Context, p tmux.PaneID, name, value string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, err := t.pane(p)
	if err != nil {
		return err
	}
	switch name {
	case "@stem_allow":
		t.panes[i].Allow = value
	case "@stem_role":
		t.panes[i].Role = value
	}
	return nil
}

func (t *Tmux) WaitShell(_ context.Context, p tmux.PaneID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.pane(p)
	return err
}

func (t *Tmux) ListClients(context.Context) ([]tmux.ClientInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, tmux.ErrClosed
	}
	return []tmux.ClientInfo{}, nil
}

// Subscribe is not faked: the session's command-finished events need the
// real output stream (the suites on real instances test them).
func (t *Tmux) Subscribe(tmux.PaneID, int) (*tmux.Subscription, error) {
	return nil, fmt.Errorf("mcptest: the fake tmux has no output stream")
}

func (t *Tmux) NewMarks(tmux.PaneID) *tmux.Marks { return nil }
