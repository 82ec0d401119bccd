package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/shellwords"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/workspace"
)

// Pane roles stem sets with the @stem_role pane option.
const (
	RoleProgram = "program"
	RoleGDB     = "gdb"
)

// DebugResult describes the debugger layout.
type DebugResult struct {
	Instance     string      `json:"instance"`
	ProgramPane  tmux.PaneID `json:"program_pane"`
	GDBPane      tmux.PaneID `json:"gdb_pane"`
	EditorPane   tmux.PaneID `json:"editor_pane"`
	DebugCommand []string    `json:"debug_command"`
	Program      string      `json:"program_command,omitempty"`
	GDBSocket    string      `json:"gdb_socket"`
	// Files are the task's files the editor was asked to open.
	Files []string `json:"files,omitempty"`
}

// DialTmux opens a control client to an instance's tmux, running the
// client inside the container when the host's tmux cannot talk to it (or
// the host has none). A host client is handed t.sock opened without
// following symlinks, so a link planted from the container is refused.
func DialTmux(ctx context.Context, rec registry.Record) (*tmux.Client, error) {
	c, err := tmux.DialOrInside(ctx, tmux.Options{Socket: rec.Dir().Tmux(), Session: SessionName},
		[]string{"podman", "exec", "-i", rec.ContainerID, "tmux"}, nil)
	if err != nil {
		return nil, fmt.Errorf("instance %s: tmux: %w", rec.Instance, err)
	}
	return c, nil
}

// Debug opens the profile's debugger layout in the instance's tmux: the
// editor pane keeps nvim, which opens the task's files (OpenTaskFiles);
// to its right a program pane (the simulator, or the terminal the program
// runs on) above a gdb pane. The student's gdb runs under stem-mcp's bridge
// so agents and the editor (its stem plugin connects to g.sock inside the
// container) see the same debugger. An earlier layout is replaced.
func (m *Manager) Debug(ctx context.Context, rec registry.Record, r *workspace.Resolved) (DebugResult, error) {
	res := DebugResult{Instance: rec.Instance, GDBSocket: rec.Dir().GDB(), Program: r.Commands.DebugProgram}
	argv, err := shellwords.Split(r.Commands.Debug)
	if err != nil {
		return res, fmt.Errorf("task %s: debug command %q: %w", r.TaskID, r.Commands.Debug, err)
	}
	// The layout runs the card's commands in this tmux: refuse a socket
	// directory that is not ours or holds a planted link (the client below
	// also never follows one, see DialTmux).
	dir := rec.Dir()
	if err := m.Layout.Check(dir); err != nil {
		return res, fmt.Errorf("instance %s: %w", rec.Instance, err)
	}
	if err := dir.CheckSockets(); err != nil {
		return res, fmt.Errorf("instance %s: %w; stem will not use it: start over with `stemctl rm %s` and `%s`", rec.Instance, err, rec.Instance, UpCommand(rec))
	}
	// The editor opens the task's files while the panes start.
	if res.Files, err = OpenTaskFiles(rec, r); err != nil {
		return res, err
	}
	tc, err := DialTmux(ctx, rec)
	if err != nil {
		return res, err
	}
	defer tc.Close()
	panes, err := tc.ListPanes(ctx)
	if err != nil {
		return res, err
	}
	var editor tmux.PaneID
	var window tmux.WindowID
	for _, p := range panes {
		if p.SessionName != SessionName {
			continue
		}
		switch {
		case p.Role == RoleProgram || p.Role == RoleGDB:
			if err := tc.KillPane(ctx, p.ID); err != nil && !errors.Is(err, tmux.ErrNoPane) {
				return res, err
			}
		case editor == "" && p.WindowName == "edit":
			editor, window = p.ID, p.WindowID
		}
	}
	if editor == "" {
		// No "edit" window (the student closed it): open one with nvim's
		// place taken by a shell.
		np, err := tc.NewWindow(ctx, tmux.NewWindowOptions{Name: "edit", Dir: r.TaskDir, Select: true})
		if err != nil {
			return res, err
		}
		editor, window = np.Pane, np.Window
	}
	res.EditorPane = editor
	dir.Remove(sockets.GDBSocket) // a bridge killed with its pane may leave it

	progArgv := []string{"bash", "-c", `printf '\033[2m[stem] the program runs on this terminal; its output appears here\033[0m\n'; exec sleep 2147483647`}
	if r.Commands.DebugProgram != "" {
		progArgv = ProgramPaneArgv(r.Commands.DebugProgram)
	}
	prog, err := tc.SplitPane(ctx, editor, tmux.SplitOptions{Percent: 45, Dir: r.TaskDir, Argv: progArgv})
	if err != nil {
		return res, fmt.Errorf("open the program pane: %w", err)
	}
	res.ProgramPane = prog.Pane
	if err := tc.SetPaneOption(ctx, prog.Pane, "@stem_role", RoleProgram); err != nil {
		return res, err
	}
	if r.Commands.DebugProgram == "" {
		info, err := tc.PaneInfo(ctx, prog.Pane)
		if err != nil {
			return res, err
		}
		argv = append(argv, "-ex", "tty "+info.TTY)
	}
	res.DebugCommand = argv
	bridge := append([]string{MCPMountPath, "gdb-bridge", "--dir", rec.SocketDir, "--"}, argv...)
	gdb, err := tc.SplitPane(ctx, prog.Pane, tmux.SplitOptions{Vertical: true, Percent: 60, Dir: r.TaskDir, Argv: bridge})
	if err != nil {
		return res, fmt.Errorf("open the gdb pane: %w", err)
	}
	res.GDBPane = gdb.Pane
	if err := tc.SetPaneOption(ctx, gdb.Pane, "@stem_role", RoleGDB); err != nil {
		return res, err
	}
	if err := waitFile(ctx, rec.Dir().GDB(), 15*time.Second); err != nil {
		text, _ := tc.Capture(ctx, gdb.Pane, tmux.CaptureOptions{})
		return res, fmt.Errorf("the debugger did not start (%v); its pane shows:\n%s", err, strings.TrimSpace(text.Text))
	}
	// The student's client (attached to the session) goes to the layout,
	// with the keys in the editor: an Ex command typed after debug must
	// not land in gdb, and the editor drives gdb itself (F5, F9, F10).
	if err := tc.SelectWindow(ctx, window); err != nil {
		return res, fmt.Errorf("show the debugger layout: %w", err)
	}
	if err := tc.SelectPane(ctx, editor); err != nil {
		return res, fmt.Errorf("focus the editor: %w", err)
	}
	return res, nil
}

// ProgramPaneScript is where the images install the program pane's script
// (containers/files/debug/program-pane, with program-wait.pl beside it).
const ProgramPaneScript = "/usr/local/lib/stem/program-pane"

// ProgramPaneArgv is the program pane's command for a debug_program: prog
// runs under `bash -c`, and its end, with its real wait status, is reported
// with the shell integration's marks; then the pane becomes an interactive
// shell. The script's header says how.
func ProgramPaneArgv(prog string) []string {
	return []string{"bash", ProgramPaneScript, prog}
}

func waitFile(ctx context.Context, p string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s after %s", filepath.Base(p), d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
