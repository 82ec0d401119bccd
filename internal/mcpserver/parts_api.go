package mcpserver

import (
	"context"

	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/verify"
)

// What the tools use of the student's tmux, Neovim and gdb. The real
// clients (tmux.Client, nvim.Client, gdbmi.Client) are what stem-mcp runs;
// these interfaces exist so a tool's logic can be tested in process
// against fakes (package mcptest), while the suites on real instances keep
// the fakes faithful.

// TmuxClient is the student's tmux server as the tools reach it.
type TmuxClient interface {
	// Done is closed when the control connection ends.
	Done() <-chan struct{}
	Close() error
	// ServerID names the server process (a restarted tmux has another).
	ServerID() string
	ListPanes(ctx context.Context) ([]tmux.Pane, error)
	PaneInfo(ctx context.Context, pane tmux.PaneID) (tmux.Pane, error)
	PanePosition(ctx context.Context, pane tmux.PaneID) (tmux.Position, error)
	Capture(ctx context.Context, pane tmux.PaneID, opt tmux.CaptureOptions) (tmux.CaptureResult, error)
	Wait(ctx context.Context, pane tmux.PaneID, opt tmux.WaitOptions) (tmux.WaitResult, error)
	SendKeys(ctx context.Context, pane tmux.PaneID, keys []tmux.Key) error
	RunWithOptions(ctx context.Context, pane tmux.PaneID, command string, opt tmux.RunOptions) (tmux.RunResult, error)
	NewWindow(ctx context.Context, opt tmux.NewWindowOptions) (tmux.NewPane, error)
	SetPaneOption(ctx context.Context, pane tmux.PaneID, name, value string) error
	WaitShell(ctx context.Context, pane tmux.PaneID) error
	ListClients(ctx context.Context) ([]tmux.ClientInfo, error)
	// Subscribe streams the panes' output (the session events); a client
	// without one returns an error and no command-finished events are made.
	Subscribe(pane tmux.PaneID, buffer int) (*tmux.Subscription, error)
	NewMarks(pane tmux.PaneID) *tmux.Marks
}

// NvimClient is the student's Neovim as the tools reach it. It connects
// at its first use and again after Neovim restarts.
type NvimClient interface {
	Connect(ctx context.Context) error
	Close() error
	Status(ctx context.Context) (*nvim.Status, error)
	Diagnostics(ctx context.Context, buf int) (*nvim.Diagnostics, error)
	ReadBuffer(ctx context.Context, ref nvim.BufferRef, start, end, maxBytes int) (*nvim.BufferText, error)
	Open(ctx context.Context, absPath string) (*nvim.Opened, error)
	Hint(ctx context.Context, buf, line int, who, text string) (int, error)
	ClearHints(ctx context.Context, buf int) (int, error)
	Command(ctx context.Context, src string) (string, error)
	Lua(ctx context.Context, code string, args []any) (any, error)
	Snapshot(ctx context.Context, buf, maxBytes int) (*nvim.Snapshot, error)
	SetLinesAt(ctx context.Context, buf, tick, start, end int, lines []string) (*nvim.Edited, error)
	Propose(ctx context.Context, buf, start, end int, lines []string, who, token string) (*nvim.Proposal, error)
	Withdraw(ctx context.Context, id, token string) error
	ProposalStatus(ctx context.Context, id, token string) (*nvim.ProposalState, error)
	Unrequest(ctx context.Context, id, token string) error
}

// GDBClient is one connection to the student's gdb (through the bridge).
type GDBClient interface {
	Exec(ctx context.Context, cmd gdbmi.Command) (gdbmi.Result, error)
	Status(ctx context.Context, withRegisters bool) (gdbmi.Status, error)
	// Events carries every client's asynchronous records; it is closed
	// when the connection ends.
	Events() <-chan gdbmi.Event
	Done() <-chan struct{}
	Close() error
}

// Parts are a verified instance's tmux, Neovim and a way to its gdb.
type Parts struct {
	Tmux TmuxClient
	Nvim NvimClient
	// GDB dials the debugger's bridge; an error wrapping
	// gdbmi.ErrNotRunning when there is none.
	GDB func(ctx context.Context) (GDBClient, error)
}

// Connector reaches the parts of the verified instance t. An error is
// returned as the call's (tmuxDown makes it part_down).
type Connector func(ctx context.Context, t verify.Target, logf func(string, ...any)) (Parts, error)

var (
	_ TmuxClient = (*tmux.Client)(nil)
	_ NvimClient = (*nvim.Client)(nil)
	_ GDBClient  = (*gdbmi.Client)(nil)
)
