package tmux_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// TestSendKeysHostile types hostile text into `cat > file` and checks that
// the file receives exactly those bytes and that nothing was executed.
func TestSendKeysHostile(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	out := filepath.Join(s.Dir, "typed")
	canary := filepath.Join(s.Dir, "canary")
	pane := programWindow(t, c, s.Dir, "sh", "-c", `exec cat > "$1"`, "sh", out)

	text := "$(touch " + canary + ")\n" +
		"#(touch " + canary + ")\n" +
		"`touch " + canary + "`; touch " + canary + "\n" +
		"a;b ; kill-server ;\n" +
		"#{pane_id} #[fg=red] ## %end 1 2 1\n" +
		`"'\ \\ \n {} { run-shell 'touch ` + canary + `' }` + "\n" +
		"~ $HOME ${HOME} %1 -t\n" +
		"zażółć ✓ \xff\xfe invalid utf-8\n" +
		"tab\there\n"
	keys, err := tmux.ParseKeys("{{braces}} typed via spec{Enter}")
	if err != nil {
		t.Fatal(err)
	}
	all := append([]tmux.Key{{Text: text}}, keys...)
	if err := c.SendKeys(ctx, pane, all); err != nil {
		t.Fatalf("SendKeys: %v", err)
	}
	want := text + "{braces}} typed via spec\n" // "{{" is "{", a lone "}" is literal
	// C-d at the start of a line ends cat.
	if err := c.SendKeys(ctx, pane, []tmux.Key{{Name: "C-d"}}); err != nil {
		t.Fatal(err)
	}
	got := waitFile(t, out, len(want))
	time.Sleep(100 * time.Millisecond)
	got, _ = os.ReadFile(out)
	if string(got) != want {
		t.Fatalf("file holds %q\nwant        %q", got, want)
	}
	noCanary(t, s.Dir)
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("server after hostile keys: %v", err)
	}
}

func TestSendKeysRefusals(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	pane := shellWindow(t, s, c)
	x := []tmux.Key{{Text: "x"}}

	if err := c.SendKeys(ctx, "%999", x); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("missing pane: %v", err)
	}
	if err := c.SendKeys(ctx, "1", x); !errors.Is(err, tmux.ErrInvalidArgument) {
		t.Errorf("bad id: %v", err)
	}
	if err := c.SendKeys(ctx, pane, []tmux.Key{{Name: "run-shell"}}); !errors.Is(err, tmux.ErrInvalidArgument) {
		t.Errorf("unknown key: %v", err)
	}

	// Copy mode: keys would drive the mode.
	s.Tmux(t, "copy-mode", "-t", string(pane))
	if err := c.SendKeys(ctx, pane, x); !errors.Is(err, tmux.ErrPaneInMode) {
		t.Errorf("copy mode: %v", err)
	}
	s.Tmux(t, "send-keys", "-t", string(pane), "-X", "cancel")

	// synchronize-panes: keys would reach every pane of the window.
	other, err := c.SplitPane(ctx, pane, tmux.SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Tmux(t, "set-option", "-w", "-t", string(pane), "synchronize-panes", "on")
	if err := c.SendKeys(ctx, pane, x); !errors.Is(err, tmux.ErrSynchronized) {
		t.Errorf("synchronized: %v", err)
	}
	s.Tmux(t, "set-option", "-w", "-t", string(pane), "synchronize-panes", "off")
	if err := c.SendKeys(ctx, pane, x); err != nil {
		t.Errorf("after synchronize-panes off: %v", err)
	}

	// A dead pane (remain-on-exit).
	s.Tmux(t, "set-option", "-w", "-t", string(pane), "remain-on-exit", "on")
	dead, err := c.SplitPane(ctx, pane, tmux.SplitOptions{Argv: []string{"sh", "-c", "sleep 0.2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := c.PaneInfo(ctx, dead.Pane)
		if err != nil {
			t.Fatal(err)
		}
		// The pane is dead when its tty closes; the status follows once
		// tmux has reaped the process (tmux 3.3a sometimes never records
		// it, so -1 is accepted after a while).
		if p.Dead && (p.DeadStatus != -1 || time.Now().After(deadline.Add(-4*time.Second))) {
			if p.DeadStatus != 3 && p.DeadStatus != -1 {
				t.Errorf("dead status %d, want 3", p.DeadStatus)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane never died: %+v", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	other = dead
	if err := c.SendKeys(ctx, other.Pane, x); !errors.Is(err, tmux.ErrPaneDead) {
		t.Errorf("dead pane: %v", err)
	}
}
