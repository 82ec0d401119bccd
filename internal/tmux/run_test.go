package tmux_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func run(t *testing.T, c *tmux.Client, pane tmux.PaneID, cmd string) (string, int) {
	t.Helper()
	out, code, err := c.Run(testCtx(t, 20*time.Second), pane, cmd)
	if err != nil {
		t.Fatalf("Run(%q): %v", cmd, err)
	}
	return out, code
}

func TestRun(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	pane := tmux.PaneID("%0")
	var typed []string
	runT := func(cmd string) (string, int) {
		typed = append(typed, cmd)
		return run(t, c, pane, cmd)
	}

	// Back to back.
	for i := 0; i < 10; i++ {
		out, code := runT(fmt.Sprintf("echo run-%d", i))
		if out != fmt.Sprintf("run-%d\n", i) || code != 0 {
			t.Fatalf("run %d: %q %d", i, out, code)
		}
	}
	// Exit codes.
	for cmd, want := range map[string]int{"false": 1, "sh -c 'exit 42'": 42, "true": 0} {
		if _, code := runT(cmd); code != want {
			t.Errorf("%s: exit %d, want %d", cmd, code, want)
		}
	}
	out, code := runT("ls /nonexistent-dir")
	if code != 2 || !strings.Contains(out, "No such file or directory") {
		t.Errorf("ls: %q %d", out, code)
	}
	// Output far larger than the screen.
	out, _ = runT("seq 1 20000")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 20000 || lines[0] != "1" || lines[19999] != "20000" {
		t.Errorf("seq: %d lines, first %q last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	// Carriage returns are applied; escape sequences are removed.
	out, _ = runT(`printf '10%%\r50%%\r100%%\n\033[31mred\033[0m\033]0;title\007\n'`)
	if out != "100%\nred\n" {
		t.Errorf("progress output %q", out)
	}
	// Quotes and special characters are typed as is.
	out, _ = runT(`printf '%s|' "a b" '$HOME' "#{pane_id}" ';'`)
	if out != `a b|$HOME|#{pane_id}|;|` {
		t.Errorf("quoting: %q", out)
	}
	// A cap keeps the end.
	typed = append(typed, "seq 1 5000")
	r, err := c.RunWithOptions(testCtx(t, 20*time.Second), pane, "seq 1 5000", tmux.RunOptions{MaxOutput: 1000})
	if err != nil || !r.Truncated || !strings.HasSuffix(r.Output, "\n5000\n") || len(r.Output) > 2000 {
		t.Errorf("capped: %+v, %v", r, err)
	}

	// The history holds exactly what was typed, nothing else.
	out, _ = runT("history")
	var hist []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		hist = append(hist, strings.TrimSpace(regexp.MustCompile(`^\s*\d+\s+`).ReplaceAllString(l, "")))
	}
	if fmt.Sprintf("%q", hist) != fmt.Sprintf("%q", typed) {
		t.Errorf("history:\n%q\nwant\n%q", hist, typed)
	}
}

// waitCommand waits until the pane's foreground program is name (a fixed
// pause can end, under load, before the shell has even read the line, and
// Run then rightly reports a typed line instead).
func waitCommand(t *testing.T, s *tmuxtest.Server, pane tmux.PaneID, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur := strings.TrimSpace(s.Tmux(t, "display-message", "-p", "-t", string(pane), "#{pane_current_command}"))
		if cur == name {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s runs %q, not %s, 10 s after it was typed", pane, cur, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunRefusals(t *testing.T) {
	s := tmuxtest.Start(t)
	c, err := tmux.Dial(testCtx(t, 10*time.Second), tmux.Options{Socket: s.Socket, ProbeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t, 60*time.Second)
	pane := tmux.PaneID("%0")

	for _, bad := range []string{"", "  ", "a\nb", "a\tb", "\x1b[A", "a\x00", "\xff", strings.Repeat("x", tmux.MaxRunCommand+1)} {
		if _, _, err := c.Run(ctx, pane, bad); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("Run(%.20q): %v", bad, err)
		}
	}

	// A program (not a shell) runs in the pane: refused before typing.
	prog := programWindow(t, c, "", "sleep", "60")
	start := time.Now()
	if _, _, err := c.Run(ctx, prog, "echo no"); !errors.Is(err, tmux.ErrNotAtPrompt) {
		t.Errorf("program pane: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v", d)
	}
	if got, _ := c.Capture(ctx, prog, tmux.CaptureOptions{}); got.Text != "" {
		t.Errorf("keys reached the program: %q", got.Text)
	}

	// A foreground command in the shell.
	if err := c.SendKeys(ctx, pane, []tmux.Key{{Text: "sleep 30"}, {Name: "Enter"}}); err != nil {
		t.Fatal(err)
	}
	waitCommand(t, s, pane, "sleep")
	if _, _, err := c.Run(ctx, pane, "echo no"); !errors.Is(err, tmux.ErrNotAtPrompt) {
		t.Errorf("busy shell: %v", err)
	}
	c.SendKeys(ctx, pane, []tmux.Key{{Name: "C-c"}})
	s.WaitPrompt(t, string(pane))

	// The student has typed half a line.
	if err := c.SendKeys(ctx, pane, []tmux.Key{{Text: "echo partial"}}); err != nil {
		t.Fatal(err)
	}
	// Let bash echo the typed text before looking at the line.
	if _, err := c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`(?m)` + regexp.QuoteMeta(tmuxtest.Prompt+"echo partial") + `$`), Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Run(ctx, pane, "echo no"); !errors.Is(err, tmux.ErrPromptBusy) {
		t.Errorf("partial line: %v", err)
	}
	if got, _ := c.Capture(ctx, pane, tmux.CaptureOptions{}); !strings.HasSuffix(got.Text, tmuxtest.Prompt+"echo partial") {
		t.Errorf("the student's line was changed: %q", got.Text)
	}
	c.SendKeys(ctx, pane, []tmux.Key{{Name: "C-u"}})

	// An unterminated quote: bash asks for more; Run cancels and says so.
	if _, _, err := c.Run(ctx, pane, `echo "unterminated`); !errors.Is(err, tmux.ErrIncompleteCommand) {
		t.Errorf("incomplete: %v", err)
	}
	if out, code := run(t, c, pane, "echo fine"); out != "fine\n" || code != 0 {
		t.Errorf("after incomplete: %q %d", out, code)
	}

	// vi command mode: typed text would be commands.
	run(t, c, pane, "set -o vi")
	c.SendKeys(ctx, pane, []tmux.Key{{Name: "Escape"}})
	time.Sleep(100 * time.Millisecond)
	if _, _, err := c.Run(ctx, pane, "echo no"); !errors.Is(err, tmux.ErrPromptBusy) {
		t.Errorf("vi command mode: %v", err)
	}
	c.SendKeys(ctx, pane, []tmux.Key{{Text: "i"}})
	if out, _ := run(t, c, pane, "echo vi-insert"); out != "vi-insert\n" {
		t.Errorf("vi insert mode: %q", out)
	}
	run(t, c, pane, "set -o emacs")

	// The command outlives ctx: ErrTimeout, and the pane works afterwards.
	short := testCtx(t, 300*time.Millisecond)
	start = time.Now()
	if _, _, err := c.Run(short, pane, "sleep 1.5; echo late"); !errors.Is(err, tmux.ErrTimeout) {
		t.Errorf("timeout: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timeout took %v", d)
	}
	waitText(t, c, pane, `(?m)^late$`)
	s.WaitPrompt(t, string(pane))
	if out, _ := run(t, c, pane, "echo after"); out != "after\n" {
		t.Errorf("after timeout: %q", out)
	}

	// Plain sh: refused by name.
	shPane := shellWindow(t, s, c)
	c.SendKeys(ctx, shPane, []tmux.Key{{Text: "exec sh"}, {Name: "Enter"}})
	waitCommand(t, s, shPane, "sh")
	if _, _, err := c.Run(ctx, shPane, "echo no"); !errors.Is(err, tmux.ErrNotAtPrompt) {
		t.Errorf("plain sh: %v", err)
	}

	// A pane of another session: its output is not observed.
	s.Tmux(t, "new-session", "-d", "-s", "other")
	var otherPane tmux.PaneID
	panes, _ := c.ListPanes(ctx)
	for _, p := range panes {
		if p.SessionName == "other" {
			otherPane = p.ID
		}
	}
	s.WaitPrompt(t, string(otherPane))
	if _, _, err := c.Run(ctx, otherPane, "echo no"); !errors.Is(err, tmux.ErrNotInSession) {
		t.Errorf("other session: %v", err)
	}

	// The shell exits: Run fails instead of hanging.
	exitPane := shellWindow(t, s, c)
	start = time.Now()
	if _, _, err := c.Run(ctx, exitPane, "exit"); !errors.Is(err, tmux.ErrNoPane) && !errors.Is(err, tmux.ErrPaneDead) {
		t.Errorf("exit: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("exit noticed after %v", d)
	}
}

// TestRunWithoutIntegration: bash without stem-prompt.sh does not answer the
// probe; Run fails within the probe timeout and leaves the line empty.
func TestRunWithoutIntegration(t *testing.T) {
	s := tmuxtest.Start(t, tmuxtest.Options{NoIntegration: true})
	c, err := tmux.Dial(testCtx(t, 10*time.Second), tmux.Options{Socket: s.Socket, ProbeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t, 20*time.Second)
	before, _ := c.Capture(ctx, "%0", tmux.CaptureOptions{})
	start := time.Now()
	if _, _, err := c.Run(ctx, "%0", "touch should-not-run"); !errors.Is(err, tmux.ErrNoIntegration) {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	time.Sleep(100 * time.Millisecond)
	if after, _ := c.Capture(ctx, "%0", tmux.CaptureOptions{}); after.Text != before.Text {
		t.Errorf("screen changed from %q to %q", before.Text, after.Text)
	}
	if _, err := os.Stat(filepath.Join(s.Home, "should-not-run")); err == nil {
		t.Error("the command ran")
	}
}

// TestRunRepairsHooks: a later rc file or the student replaced
// PROMPT_COMMAND and PS0; the probe puts the hooks back before Run types.
func TestRunRepairsHooks(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tamper := range []string{
		`PROMPT_COMMAND="history -a;$PROMPT_COMMAND"`, // ours no longer first: $? would be lost
		`PROMPT_COMMAND=true; PS0=`,                   // ours gone
		`PROMPT_COMMAND=(true "history -a")`,          // array form
		`unset __stem_key`,                            // the key gone
		`export __stem_key=0000000000000000`,          // a key children could read
	} {
		if err := c.SendKeys(ctx, "%0", []tmux.Key{{Text: tamper}, {Name: "Enter"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, "%0", tmux.WaitOptions{Quiet: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if out, code := run(t, c, "%0", "sh -c 'echo x; exit 7'"); out != "x\n" || code != 7 {
			t.Errorf("after %s: %q %d", tamper, out, code)
		}
	}
}

func TestRunConcurrent(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := c.Run(testCtx(t, 30*time.Second), "%0", fmt.Sprintf("echo c%d", i))
			if err == nil && out != fmt.Sprintf("c%d\n", i) {
				err = fmt.Errorf("run %d got %q", i, out)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestRunForgedMarks: a command whose output holds the integration's marks
// (the old unkeyed form, another shell's key, a fake probe answer) runs to
// its real end with its real status, and the shell's key never reaches a
// child process.
func TestRunForgedMarks(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	forged := `\033]133;D;0\007\033]133;D;0;0123456789abcdef\007\033]133;A;0123456789abcdef\007\033]133;stem-probe;0;emacs;0;0123456789abcdef\007`
	if err := os.WriteFile(filepath.Join(s.Home, "evil.txt"), []byte(strings.ReplaceAll(strings.ReplaceAll(forged, `\033`, "\x1b"), `\007`, "\x07")+"after the marks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, c, "%0", `cat `+filepath.Join(s.Home, "evil.txt")+`; sleep 0.3; printf '`+forged+`'; sleep 0.3; echo done; sh -c 'exit 5'`)
	if code != 5 || !strings.HasSuffix(out, "after the marks\ndone\n") {
		t.Fatalf("forged marks: %q, exit %d (want the whole output and 5)", out, code)
	}
	// Back to back after it: the tracker state did not leak.
	if out, code := run(t, c, "%0", "echo next"); out != "next\n" || code != 0 {
		t.Fatalf("next run: %q %d", out, code)
	}
	// The key is a shell variable, never in a child's environment.
	if out, _ := run(t, c, "%0", `sh -c 'echo "[${__stem_key-unset}]"'; env | grep -c __stem_key`); out != "[unset]\n0\n" {
		t.Fatalf("a child process sees the key: %q", out)
	}
	// The pane lists the one shell's key.
	ctx := testCtx(t, 10*time.Second)
	keys, err := c.DisplayFormat(ctx, "%0", "@stem_keys")
	if err != nil || len(strings.Fields(keys)) != 1 {
		t.Fatalf("@stem_keys %q %v", keys, err)
	}
}

// A window opened a moment ago may not run its shell yet: tmux's fork
// before the exec reads as "tmux" (here a shell named tmux holds the exec
// back until the test lets it go), and so does the shell's own rc while it
// runs the integration's tmux set-option. WaitShell waits for it; Run
// gives such a pane a moment to become its shell, and refuses one that
// stays so.
func TestWaitShellOnAWindowStillStarting(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 30*time.Second)
	fork := filepath.Join(s.Dir, "tmux")
	if err := os.Symlink("/bin/sh", fork); err != nil {
		t.Fatal(err)
	}
	bash, _ := exec.LookPath("bash")
	// A FIFO each: with one, a release written while the last pane's sh
	// still had it open could be left in it and lost when that sh closed
	// it, and the next pane would wait for ever.
	var fifo string
	n := 0
	held := func() tmux.PaneID {
		n++
		fifo = filepath.Join(s.Dir, fmt.Sprintf("release%d", n))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		start := "read x < " + fifo + "; exec " + bash + " --rcfile " + filepath.Join(s.Dir, "bashrc") + " -i"
		p := programWindow(t, c, "", fork, "-c", start)
		waitCommand(t, s, p, "tmux")
		return p
	}
	release := func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.Write([]byte("go\n"))
		f.Close()
	}

	// Run on a pane that stays "tmux" is refused.
	p := held()
	if _, _, err := c.Run(ctx, p, "echo early"); !errors.Is(err, tmux.ErrNotAtPrompt) {
		t.Fatalf("Run before the shell started: %v", err)
	}
	release()

	// Run called while the pane is still "tmux", released once Run has
	// found it so: it runs in the shell that comes.
	p = held()
	waiting := make(chan struct{})
	c.OnSettlingForTest(func() { close(waiting) })
	ran := make(chan error, 1)
	go func() {
		out, _, err := c.Run(ctx, p, "echo late")
		if err == nil && out != "late\n" {
			err = fmt.Errorf("output %q", out)
		}
		ran <- err
	}()
	select {
	case <-waiting:
		release()
	case err := <-ran:
		t.Fatalf("Run on a pane starting its shell did not wait for it: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run on a pane starting its shell: %v", err)
	}
	c.OnSettlingForTest(nil)

	p = held()
	done := make(chan error, 1)
	go func() { done <- c.WaitShell(ctx, p) }()
	select {
	case err := <-done:
		t.Fatalf("WaitShell returned before the shell started: %v", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("WaitShell: %v", err)
	}
	if out, code := run(t, c, p, "echo started"); out != "started\n" || code != 0 {
		t.Fatalf("Run after WaitShell: %q %d", out, code)
	}

	// A program that writes and is not a shell is refused.
	prog := programWindow(t, c, "", "sh", "-c", "echo hello; exec sleep 60")
	if err := c.WaitShell(ctx, prog); !errors.Is(err, tmux.ErrNotAtPrompt) {
		t.Fatalf("WaitShell on a program: %v", err)
	}
}
