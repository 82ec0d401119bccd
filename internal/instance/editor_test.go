package instance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/probe"
)

// editPanes lists the panes of windows named edit: "pane_id command".
func editPanes(t *testing.T, sock string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(tmuxIn(t, sock, "list-panes", "-s", "-t", "stem", "-F", "#{window_name} #{pane_id} #{pane_current_command}"), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "edit" {
			out = append(out, f[1]+" "+f[2])
		}
	}
	return out
}

// waitFor polls cond (a tmux or probe question) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The student quits Neovim (:q): up puts it back in the same pane of the
// one edit window; a pane the student is using for something else keeps
// it, and Neovim gets the edit window's name and a window of its own.
func TestUpReopensEditorInPlace(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	dir := rec.Dir()
	before := editPanes(t, dir.Tmux())
	if len(before) != 1 || !strings.HasSuffix(before[0], " nvim") {
		t.Fatalf("edit panes after up: %q", before)
	}
	pane := strings.Fields(before[0])[0]
	quit := func() {
		t.Helper()
		tmuxIn(t, dir.Tmux(), "send-keys", "-t", pane, "Escape", ":qa!", "Enter")
		waitFor(t, "nvim to quit", func() bool { return probe.Nvim(ctx, dir.Nvim()) != nil })
		waitFor(t, "the edit pane to become a shell", func() bool {
			return tmuxIn(t, dir.Tmux(), "display-message", "-p", "-t", pane, "#{pane_current_command}") == "bash"
		})
	}
	quit()

	res := w.up(r)
	if res.Action != instance.Repaired || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up after :q: %+v", res)
	}
	if err := probe.Nvim(ctx, dir.Nvim()); err != nil {
		t.Fatalf("nvim after repair: %v", err)
	}
	if got := editPanes(t, dir.Tmux()); len(got) != 1 || got[0] != pane+" nvim" {
		t.Fatalf("after the repair want nvim back in %s, the one edit pane: %q", pane, got)
	}

	// Quit again: the pane now says how to get the editor back.
	quit()
	waitFor(t, "the editor-closed line", func() bool {
		return strings.Contains(tmuxIn(t, dir.Tmux(), "capture-pane", "-p", "-J", "-t", pane), "stem: the editor is closed; on the host, `stemctl up native-amd64 demo hello 1")
	})
	// The student works in that shell: up leaves the work where it is.
	tmuxIn(t, dir.Tmux(), "send-keys", "-t", pane, "-l", "sleep 600")
	tmuxIn(t, dir.Tmux(), "send-keys", "-t", pane, "Enter")
	waitFor(t, "sleep to run in the old edit pane", func() bool {
		return tmuxIn(t, dir.Tmux(), "display-message", "-p", "-t", pane, "#{pane_current_command}") == "sleep"
	})
	if res := w.up(r); res.Action != instance.Repaired {
		t.Fatalf("up after the second :q: %+v", res)
	}
	got := editPanes(t, dir.Tmux())
	if len(got) != 1 || !strings.HasSuffix(got[0], " nvim") || strings.HasPrefix(got[0], pane+" ") {
		t.Fatalf("with the old edit pane busy want one new edit window running nvim: %q", got)
	}
	if name := tmuxIn(t, dir.Tmux(), "display-message", "-p", "-t", pane, "#{window_name} #{pane_current_command}"); name != "edit-shell sleep" {
		t.Fatalf("the student's busy pane: %q", name)
	}
}
