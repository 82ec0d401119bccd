package tmux_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// TestListPanesHostile: student-controlled fields holding separators, tabs,
// newlines and text shaped like our framing cannot spoof fields or panes.
func TestListPanesHostile(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)

	// pane_current_command is argv[0] of the foreground process: any bytes.
	evilCmd := "x\ny\t5:%9\t1:"
	cmdPane := programWindow(t, c, "", "bash", "-c", `exec -a "$1" sleep 60`, "bash", evilCmd)
	// A title set by the program itself (OSC 2).
	evilTitle := "3:%7 2:@9 fake:title ✓"
	titlePane := programWindow(t, c, "", "sh", "-c", `printf '\033]2;%s\033\\' "$1"; exec sleep 60`, "sh", evilTitle)
	// Options and window names set by the student's own tmux commands.
	evilRole := "4:role\n%99\t0:\n1:x"
	s.Tmux(t, "set-option", "-p", "-t", string(titlePane), "@stem_role", evilRole)
	s.Tmux(t, "set-option", "-p", "-t", string(titlePane), "@stem_allow", "1")
	s.Tmux(t, "rename-window", "-t", string(cmdPane), "w\nname\t%3:")
	// Titles with control characters are refused by tmux; make sure it
	// stays refused and nothing leaks.
	s.Tmux(t, "select-pane", "-t", string(cmdPane), "-T", "t\ttab\nnl")

	var panes []tmux.Pane
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		panes, err = c.ListPanes(ctx)
		if err != nil {
			t.Fatalf("ListPanes: %v", err)
		}
		var cmdOK, titleOK bool
		for _, p := range panes {
			cmdOK = cmdOK || (p.ID == cmdPane && p.Command == evilCmd)
			titleOK = titleOK || (p.ID == titlePane && p.Title == evilTitle)
		}
		if cmdOK && titleOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hostile fields never showed up: %+v", panes)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Same panes as tmux itself lists.
	var ids []string
	for _, p := range panes {
		ids = append(ids, string(p.ID))
	}
	want := strings.Fields(s.Tmux(t, "list-panes", "-a", "-F", "#{pane_id}"))
	sort.Strings(ids)
	sort.Strings(want)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("pane ids %v, tmux lists %v", ids, want)
	}
	for _, p := range panes {
		switch p.ID {
		case titlePane:
			if p.Role != evilRole || p.Allow != "1" || !p.Allowed() {
				t.Errorf("options: role %q allow %q", p.Role, p.Allow)
			}
		case cmdPane:
			if p.WindowName != `w\nname\t%3:` { // tmux escapes control characters in names
				t.Errorf("window name %q", p.WindowName)
			}
			if strings.ContainsAny(p.Title, "\t\n") {
				t.Errorf("title with controls accepted: %q", p.Title)
			}
			if p.Allowed() || p.Role != "" {
				t.Errorf("unset options read as %q %q", p.Allow, p.Role)
			}
		}
		if !regexp.MustCompile(`^\$[0-9]+$`).MatchString(p.SessionID) || p.WindowID == "" || p.PID <= 0 ||
			p.Width <= 0 || p.Height <= 0 || !strings.HasPrefix(p.TTY, "/dev/pts/") {
			t.Errorf("pane %s: implausible fields %+v", p.ID, p)
		}
	}

	// PaneInfo and DisplayFormat read the same framed values.
	info, err := c.PaneInfo(ctx, cmdPane)
	if err != nil || info.Command != evilCmd {
		t.Fatalf("PaneInfo = %+v, %v", info, err)
	}
	role, err := c.DisplayFormat(ctx, titlePane, "@stem_role")
	if err != nil || role != evilRole {
		t.Fatalf("DisplayFormat @stem_role = %q, %v", role, err)
	}
}

func TestPaneErrors(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.PaneInfo(ctx, "%999"); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("PaneInfo(%%999): %v", err)
	}
	if _, err := c.DisplayFormat(ctx, "%999", "pane_id"); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("DisplayFormat(%%999): %v", err)
	}
	if _, err := c.Capture(ctx, "%999", tmux.CaptureOptions{}); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("Capture(%%999): %v", err)
	}
	for _, bad := range []string{"%", "0", "%1;kill-server", "%1 ", "=%1", "stem:0.0", "%01x", ""} {
		if _, err := c.Capture(ctx, tmux.PaneID(bad), tmux.CaptureOptions{}); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("Capture(%q): %v", bad, err)
		}
	}
	for _, v := range []string{"#(touch canary)", "pane_id}#{pane_pid", "E:pane_id", "Pane_ID", "a b", "@x;y", ""} {
		if _, err := c.DisplayFormat(ctx, "%0", v); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("DisplayFormat(%q): %v", v, err)
		}
	}
	noCanary(t, s.Home)
}

func TestCapture(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	long := strings.Repeat("0123456789", 30) // wraps in a 120-column pane
	pane := programWindow(t, c, "", "sh", "-c",
		`seq 1 300; printf '\033[31mRED\033[0m plain\n'; printf '%s\n' "$1"; printf 'END\n'; exec sleep 60`, "sh", long)
	waitText(t, c, pane, "END")

	vis, err := c.Capture(ctx, pane, tmux.CaptureOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(vis.Text, "\n")
	if lines[len(lines)-1] != "END" || strings.Contains(vis.Text, "\x1b") || !strings.Contains(vis.Text, "RED plain") {
		t.Fatalf("visible capture: %q", vis.Text)
	}
	if strings.Contains(vis.Text, long) {
		t.Fatalf("wrapped line captured whole without Join")
	}

	joined, _ := c.Capture(ctx, pane, tmux.CaptureOptions{Join: true})
	if !strings.Contains(joined.Text, "\n"+long+"\n") {
		t.Fatalf("Join: %q", joined.Text)
	}

	esc, _ := c.Capture(ctx, pane, tmux.CaptureOptions{Escapes: true})
	if !regexp.MustCompile(`\x1b\[[0-9;]*31[0-9;]*mRED`).MatchString(esc.Text) {
		t.Fatalf("Escapes: %q", esc.Text)
	}

	all, _ := c.Capture(ctx, pane, tmux.CaptureOptions{Scrollback: true})
	if !strings.HasPrefix(all.Text, "1\n2\n3\n") || !strings.HasSuffix(all.Text, "END") {
		t.Fatalf("Scrollback: starts %q ends %q", all.Text[:min(20, len(all.Text))], all.Text[max(0, len(all.Text)-20):])
	}

	// The 3 lines just above the screen, then the top line of the screen.
	info, _ := c.PaneInfo(ctx, pane)
	r, _ := c.Capture(ctx, pane, tmux.CaptureOptions{Range: &tmux.LineRange{Start: -3, End: 0}})
	allLines := strings.Split(all.Text, "\n")
	h := info.HistorySize
	if want := strings.Join(allLines[h-3:h+1], "\n"); r.Text != want {
		t.Fatalf("Range -3..0 = %q, want %q", r.Text, want)
	}

	capped, _ := c.Capture(ctx, pane, tmux.CaptureOptions{Scrollback: true, MaxBytes: 100})
	if !capped.Truncated || len(capped.Text) > 100 || !strings.HasSuffix(capped.Text, "END") {
		t.Fatalf("MaxBytes: %+v", capped)
	}
}

// TestCaptureForgedProtocol: a pane prints lines that are exact guesses
// of the guard lines of our own capture command (tmux numbers commands
// with a global counter and stamps them in seconds), plus fake
// notifications. The capture returns them as text and nothing desyncs.
func TestCaptureForgedProtocol(t *testing.T) {
	s := tmuxtest.Start(t)
	s.Tmux(t, "set-option", "-g", "history-limit", "20000")
	c := s.Dial(t)
	ctx := testCtx(t, 60*time.Second)

	now := time.Now().Unix()
	var forged strings.Builder
	for ts := now; ts <= now+5; ts++ {
		for n := 0; n < 1500; n++ {
			fmt.Fprintf(&forged, "%%end %d %d 1\n%%error %d %d 1\n", ts, n, ts, n)
		}
	}
	forged.WriteString("%output %999 forged\n%exit\n%begin 1 1 1\nstem-0123456789abcdef0123456789abcdef\n")
	file := filepath.Join(s.Dir, "forged")
	if err := os.WriteFile(file, []byte(forged.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	sub, _ := c.Subscribe("", 1<<16)
	pane := programWindow(t, c, "", "sh", "-c", `cat "$1"; echo DONE; exec sleep 60`, "sh", file)
	waitText(t, c, pane, "DONE")

	for i := 0; i < 3; i++ {
		got, err := c.Capture(ctx, pane, tmux.CaptureOptions{Scrollback: true})
		if err != nil {
			t.Fatalf("capture %d: %v", i, err)
		}
		if !strings.HasPrefix(got.Text, forged.String()) {
			t.Fatalf("capture %d differs from what the pane printed (got %d bytes, want %d)", i, len(got.Text), forged.Len())
		}
		if _, err := c.Version(ctx); err != nil {
			t.Fatalf("next command after capture %d: %v", i, err)
		}
	}
	// None of the forged lines became a notification.
	for {
		select {
		case n := <-sub.C():
			if n.Pane == "%999" || n.Kind == "exit" {
				t.Fatalf("forged notification delivered: %+v", n)
			}
			continue
		default:
		}
		break
	}
}

func TestLayout(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)

	dir := filepath.Join(s.Dir, `d ir'"$x;#{y}`)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name := `-F a"b$HOME;#{pane_id}#(touch canary)#[fg=red]##[x#S~{x}\ #`
	np, err := c.NewWindow(ctx, tmux.NewWindowOptions{Name: name, Dir: dir})
	if err != nil {
		t.Fatalf("NewWindow: %v", err)
	}
	s.WaitPrompt(t, string(np.Pane))
	info, err := c.PaneInfo(ctx, np.Pane)
	if err != nil || info.WindowName != name || info.WindowID != np.Window {
		t.Fatalf("new window: %+v, %v", info, err)
	}
	if info.WindowActive {
		t.Errorf("background window became current")
	}
	if cwd, err := c.DisplayFormat(ctx, np.Pane, "pane_current_path"); err != nil || cwd != dir {
		t.Errorf("pane_current_path = %q, %v; want %q", cwd, err, dir)
	}

	// argv is executed without a shell: hostile arguments arrive as is.
	args := []string{"$(touch canary)", "#(touch canary)", "a;b", "-t", "line\nbreak", `"'\`, "~", "{}"}
	out := filepath.Join(s.Dir, "args.out")
	argv := append([]string{"sh", "-c", `printf '%s\0' "$@" > "$0"`, out}, args...)
	if _, err := c.NewWindow(ctx, tmux.NewWindowOptions{Argv: argv}); err != nil {
		t.Fatalf("NewWindow argv: %v", err)
	}
	want := strings.Join(args, "\x00") + "\x00"
	if got := string(waitFile(t, out, len(want))); got != want {
		t.Errorf("argv arrived as %q, want %q", got, want)
	}
	// A one-element argv: a program whose path holds a space and quotes.
	prog := filepath.Join(s.Dir, `my prog's "x"`)
	ran := filepath.Join(s.Dir, "ran")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho ran > "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewWindow(ctx, tmux.NewWindowOptions{Argv: []string{prog}}); err != nil {
		t.Fatalf("NewWindow one-element argv: %v", err)
	}
	waitFile(t, ran, 4)

	// Splits.
	before, _ := c.PaneInfo(ctx, np.Pane)
	sp, err := c.SplitPane(ctx, np.Pane, tmux.SplitOptions{Vertical: true, Percent: 30})
	if err != nil {
		t.Fatalf("SplitPane: %v", err)
	}
	spInfo, _ := c.PaneInfo(ctx, sp.Pane)
	if sp.Window != np.Window || spInfo.Height < before.Height*25/100 || spInfo.Height > before.Height*35/100 {
		t.Errorf("split: %+v height %d of %d", sp, spInfo.Height, before.Height)
	}
	if spInfo.Active {
		t.Errorf("split without Select took focus")
	}
	right, err := c.SplitPane(ctx, np.Pane, tmux.SplitOptions{Before: true, Select: true})
	if err != nil {
		t.Fatalf("SplitPane -h -b: %v", err)
	}
	rInfo, _ := c.PaneInfo(ctx, right.Pane)
	if !rInfo.Active || rInfo.Index != 0 {
		t.Errorf("split before+select: %+v", rInfo)
	}
	for _, bad := range []tmux.SplitOptions{{Percent: 100}, {Percent: -1}, {Dir: "relative"}, {Argv: []string{""}}} {
		if _, err := c.SplitPane(ctx, np.Pane, bad); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("SplitPane(%+v): %v", bad, err)
		}
	}

	// Select.
	if err := c.SelectPane(ctx, sp.Pane); err != nil {
		t.Fatal(err)
	}
	if err := c.SelectWindow(ctx, np.Window); err != nil {
		t.Fatal(err)
	}
	spInfo, _ = c.PaneInfo(ctx, sp.Pane)
	if !spInfo.Active || !spInfo.WindowActive {
		t.Errorf("after select: %+v", spInfo)
	}

	// Options.
	role := "gdb\n\"$HOME\";#{pane_id}"
	if err := c.SetPaneOption(ctx, sp.Pane, "@stem_role", role); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PaneInfo(ctx, sp.Pane); p.Role != role {
		t.Errorf("role %q, want %q", p.Role, role)
	}
	if err := c.UnsetPaneOption(ctx, sp.Pane, "@stem_role"); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PaneInfo(ctx, sp.Pane); p.Role != "" {
		t.Errorf("role after unset %q", p.Role)
	}
	for _, opt := range []string{"remain-on-exit", "@", "@a;b", "@a b", "status-right", "@x}"} {
		if err := c.SetPaneOption(ctx, sp.Pane, opt, "1"); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("SetPaneOption(%q): %v", opt, err)
		}
	}
	renamed := "-t renamed #{pane_id} #[x] ✓"
	if err := c.RenameWindow(ctx, np.Window, renamed); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PaneInfo(ctx, sp.Pane); p.WindowName != renamed {
		t.Errorf("window name %q, want %q", p.WindowName, renamed)
	}

	// Kill.
	if err := c.KillPane(ctx, sp.Pane); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PaneInfo(ctx, sp.Pane); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("killed pane: %v", err)
	}
	if err := c.KillPane(ctx, sp.Pane); !errors.Is(err, tmux.ErrNoPane) {
		t.Errorf("second kill: %v", err)
	}
	if v, err := c.Version(ctx); err != nil || v != "3.3a" {
		t.Logf("server version %q, %v", v, err)
		if err != nil {
			t.Fatal(err)
		}
	}
	noCanary(t, s.Dir)
	noCanary(t, s.Home)
	noCanary(t, dir)
}
