package instance

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/sockets"
)

// editWindow is the tmux window stem-init starts Neovim in.
const editWindow = "edit"

// editCommand is the edit pane's program, as stem-init starts it: Neovim
// on the instance's socket; when it exits the pane says so, and how to get
// it back, and becomes a login shell. The line is how the student learns
// that the editor stem's tools use is gone; it costs nothing while Neovim
// runs.
func editCommand(up string) string {
	msg := "stem: the editor is closed; on the host, `" + up + "` reopens it here"
	return `set -m; nvim --listen "$STEM_SOCKDIR/n.sock"; printf '\n%s\n' ` + shellQuote(msg) + `; exec bash -l`
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// paneID is tmux's pane id; anything else from the container's tmux is
// not used as a target.
var paneID = regexp.MustCompile(`^%[0-9]+$`)

// editPane is the first pane of the edit window as the container's tmux
// reports it (the window name and command are the container's text).
type editPane struct {
	id   string
	idle bool // a shell at its prompt, or a dead pane: nothing is lost by respawning it
	cmd  string
}

// findEditPane asks the container's tmux for the edit window's first pane;
// ok is false when there is none (the student closed the window).
func (m *Manager) findEditPane(ctx context.Context, dir sockets.Dir, id string) (p editPane, ok bool, err error) {
	var out, errOut strings.Builder
	code, err := m.Engine.Exec(ctx, id, engine.ExecSpec{
		Cmd:    []string{"tmux", "-S", dir.Tmux(), "list-panes", "-s", "-t", "stem", "-F", "#{pane_id}\t#{pane_dead}\t#{pane_current_command}\t#{window_name}"},
		Stdout: &out, Stderr: &errOut,
	})
	if err == nil && code != 0 {
		err = fmt.Errorf("tmux list-panes exited with %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	if err != nil {
		return editPane{}, false, err
	}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 || f[3] != editWindow || !paneID.MatchString(f[0]) {
			continue
		}
		cmd := f[2]
		return editPane{id: f[0], cmd: cmd, idle: f[1] == "1" || cmd == "bash" || cmd == "sh"}, true, nil
	}
	return editPane{}, false, nil
}

// restartNvim puts Neovim back where it was: in the edit window's pane,
// respawned, when that pane is a shell at its prompt (what quitting Neovim
// leaves). A pane running something else keeps it: its window is renamed
// edit-shell and Neovim gets a new edit window, so there is still one.
// Everything runs the container's own tmux (through exec), so a host tmux
// of another version cannot matter.
func (m *Manager) restartNvim(ctx context.Context, plan *Plan, dir sockets.Dir, id string) error {
	fail := func(err error) error {
		return fmt.Errorf("nvim in %s is not running and starting it again failed: %w; to start the whole session over (this ends the student's shells), run `stemctl rm %s` and `stemctl up` again", plan.Name, err, plan.Name)
	}
	// A dead nvim can leave its socket behind, and nvim will not listen on
	// an existing path. Only a socket is removed, never what replaced it,
	// and never through a <cid12> swapped for a symlink.
	dir.RemoveSocket(sockets.NvimSocket)
	p, ok, err := m.findEditPane(ctx, dir, id)
	if err != nil {
		return fail(err)
	}
	tm := []string{"tmux", "-S", dir.Tmux()}
	cmd := editCommand(UpCommand(m.recordOf(plan)))
	var steps [][]string
	switch {
	case ok && p.idle:
		m.progress("nvim in %s is not running; starting it again in its edit window", plan.Name)
		steps = [][]string{{"respawn-pane", "-k", "-t", p.id, "-c", plan.Resolved.TaskDir, cmd}}
	case ok:
		m.progress("nvim in %s is not running, and its edit window runs %q: renaming that window edit-shell and starting nvim in a new edit window", plan.Name, p.cmd)
		steps = [][]string{
			{"rename-window", "-t", p.id, editWindow + "-shell"},
			{"new-window", "-d", "-n", editWindow, "-c", plan.Resolved.TaskDir, cmd},
		}
	default:
		m.progress("nvim in %s is not running; starting it in a new edit window", plan.Name)
		steps = [][]string{{"new-window", "-d", "-n", editWindow, "-c", plan.Resolved.TaskDir, cmd}}
	}
	for _, step := range steps {
		var out strings.Builder
		code, err := m.Engine.Exec(ctx, id, engine.ExecSpec{Cmd: append(tm, step...), Stdout: &out, Stderr: &out})
		if err == nil && code != 0 {
			err = fmt.Errorf("tmux %s exited with %d: %s", step[0], code, strings.TrimSpace(out.String()))
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := m.waitSockets(ctx, dir, id); err != nil {
		return fail(err)
	}
	return nil
}
