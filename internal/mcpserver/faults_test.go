package mcpserver_test

// Faults: the programs behind stem-mcp die, restart, vanish or are
// replaced while a session runs. Every call must either work (through a
// transparent reconnect) or fail with a message that says what happened
// and how to fix it; stale sockets must never be served.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
)

// refusedWithin calls a tool until it is refused (the server trusts a
// verification for a few seconds) and returns the message.
func refusedWithin(t testing.TB, s *session, d time.Duration, tool string, args map[string]any) (string, time.Duration) {
	t.Helper()
	msg, _, after := refusedCodeWithin(t, s, d, tool, args)
	return msg, after
}

// refusedCodeWithin is refusedWithin with the tool error's code ("" for a
// protocol error).
func refusedCodeWithin(t testing.TB, s *session, d time.Duration, tool string, args map[string]any) (string, errcode.Code, time.Duration) {
	t.Helper()
	t0 := time.Now()
	for {
		out, etext, code, err := s.callCoded(tool, args)
		if err != nil {
			return err.Error(), "", time.Since(t0)
		}
		if etext != "" {
			return etext, code, time.Since(t0)
		}
		if time.Since(t0) > d {
			t.Fatalf("%s still answers %v after the fault: %s", tool, d, clip(mustJSON(out), 300))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// okWithin calls a tool until it succeeds.
func okWithin(t testing.TB, s *session, d time.Duration, tool string, args map[string]any) map[string]any {
	t.Helper()
	t0 := time.Now()
	for {
		out, etext, err := s.call(tool, args)
		if err == nil && etext == "" {
			return out
		}
		if time.Since(t0) > d {
			t.Fatalf("%s does not work again %v after the repair: %v %s", tool, d, err, etext)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFaultNvimRestart(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	in.KillNvim(t)
	msg := s.refused("nvim_status", nil)
	if !strings.Contains(strings.ToLower(msg), "nvim") && !strings.Contains(strings.ToLower(msg), "neovim") {
		t.Errorf("with Neovim gone the error does not name it: %s", msg)
	}
	t.Logf("nvim killed: %s", msg)
	// Other tools go on working.
	s.ok("pane_list", nil)
	in.StartNvim(t)
	out := okWithin(t, s, 10*time.Second, "nvim_status", nil)
	if strings.Contains(mustJSON(out), "words.c") {
		t.Fatalf("the restarted Neovim should not have words.c open: %v", out)
	}
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	if _, ok := st.bufferText(filepath.Join(in.Resolved.TaskDir, "words.c")); !ok {
		t.Fatal("nvim_open after the restart did not reach the new Neovim")
	}
}

func TestFaultTmuxKilled(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe")
	s.ok("pane_list", nil)
	in.KillTmux()
	msg := s.refused("pane_list", nil)
	if !strings.Contains(msg, "tmux") {
		t.Errorf("with tmux gone the error does not name it: %s", msg)
	}
	t.Logf("tmux killed: %s", msg)
	in.RestartTmux(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	st.run(shell, "echo AFTER-RESTART")
	st.waitPane(shell, "(?m)^AFTER-RESTART$", 10*time.Second)
	out := okWithin(t, s, 10*time.Second, "pane_capture", map[string]any{"pane": shell})
	if !strings.Contains(str(out["text"]), "AFTER-RESTART") {
		t.Fatalf("pane_capture after the restart: %v", out)
	}
	okWithin(t, s, 10*time.Second, "nvim_status", nil)
}

// TestFaultCursorAfterTmuxRestart: tmux restarted in the same container
// numbers its panes alike, so a cursor of the old server names a pane that
// exists again with other lines. It is refused, saying to drop it; a
// cursor of the new server works.
func TestFaultCursorAfterTmuxRestart(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "observe")
	shell := st.pane("shell")
	st.waitPrompt(shell)
	old := str(s.ok("pane_capture", map[string]any{"pane": shell})["cursor"])
	in.RestartTmux(t)
	if np := st.pane("shell"); np != shell {
		t.Fatalf("the restarted server's shell pane is %s, not %s: the pane check alone would refuse", np, shell)
	}
	st.waitPrompt(shell)
	cur := str(okWithin(t, s, 10*time.Second, "pane_capture", map[string]any{"pane": shell})["cursor"])
	if strings.Split(cur, ":")[1] != strings.Split(old, ":")[1] {
		t.Fatalf("cursors %q and %q: the container changed", old, cur)
	}
	msg := s.refused("pane_capture", map[string]any{"pane": shell, "since": old})
	if !strings.Contains(msg, "another tmux server") || !strings.Contains(msg, "drop the cursor") {
		t.Fatalf("a cursor of the old tmux server: %s", msg)
	}
	st.run(shell, "echo AFTER-RESTART")
	st.waitPane(shell, "(?m)^AFTER-RESTART$", 10*time.Second)
	if text := str(s.ok("pane_capture", map[string]any{"pane": shell, "since": cur})["text"]); !strings.Contains(text, "AFTER-RESTART") {
		t.Fatalf("a cursor of the new server: %q", text)
	}
}

func TestFaultContainerRemoved(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe")
	s.ok("session_status", nil)
	in.RemoveContainer()
	msg, after := refusedWithin(t, s, 10*time.Second, "pane_list", nil)
	t.Logf("container removed: refused after %v: %s", after.Round(time.Millisecond), msg)
	if !strings.Contains(msg, "no longer exists") || !strings.Contains(msg, "stemctl up") {
		t.Fatalf("the refusal does not say what happened and how to fix it: %s", msg)
	}
	// Every tool is refused now, not only the first.
	for _, tool := range []string{"session_status", "nvim_status", "task_info", "gdb_status", "session_events"} {
		if m := s.refused(tool, nil); !strings.Contains(m, "stemctl up") {
			t.Errorf("%s: %s", tool, m)
		}
	}
	if _, err := s.readResource("stem://context"); err == nil {
		t.Error("stem://context answered for a removed container")
	}
}

func TestFaultContainerRecreated(t *testing.T) {
	in := fixture(t)
	oldID := in.Record.ContainerID
	byName := connect(t, in, "observe", "--instance", in.Name)
	bySel := connect(t, in, "observe")
	for _, s := range []*session{byName, bySel} {
		if out := s.ok("session_status", nil); str(out["container_id"]) != oldID {
			t.Fatalf("before: %v", out)
		}
	}
	old := in.Recreate(t, true)
	if in.Record.ContainerID == oldID || in.Dir.Path == old.Path {
		t.Fatal("Recreate did not give a new container id and directory")
	}
	// Mark the old servers, which still answer in the old directory.
	mark := func(sock, window string) {
		t.Helper()
		if out, err := runTmux(sock, "rename-window", "-t", "stem:shell", window); err != nil {
			t.Fatalf("rename window on %s: %v %s", sock, err, out)
		}
	}
	mark(old.Tmux(), "OLD-SERVER")
	mark(in.Dir.Tmux(), "NEW-SERVER")

	// The fixed-instance server follows the registry to the new container.
	out := okWithin(t, byName, 10*time.Second, "session_status", nil)
	waitUntil(t, 10*time.Second, "the --instance server moves to the new container", func() bool {
		out = byName.ok("session_status", nil)
		return str(out["container_id"]) == in.Record.ContainerID
	})
	if pl := mustJSON(byName.ok("pane_list", nil)); !strings.Contains(pl, "NEW-SERVER") || strings.Contains(pl, "OLD-SERVER") {
		t.Fatalf("the --instance server talks to the wrong tmux: %s", clip(pl, 1000))
	}

	// The selection still names the old directory: refused, with the fix.
	msg, _ := refusedWithin(t, bySel, 10*time.Second, "pane_list", nil)
	t.Logf("stale selection: %s", msg)
	if !strings.Contains(msg, "stemctl mcp select") {
		t.Fatalf("the stale selection's refusal does not say how to fix it: %s", msg)
	}
	if strings.Contains(msg, "OLD-SERVER") {
		t.Fatal("the old server's content leaked")
	}
	in.Select(t)
	out = okWithin(t, bySel, 10*time.Second, "session_status", nil)
	if str(out["container_id"]) != in.Record.ContainerID {
		t.Fatalf("after selecting the new instance: %v", out)
	}
	if pl := mustJSON(bySel.ok("pane_list", nil)); !strings.Contains(pl, "NEW-SERVER") || strings.Contains(pl, "OLD-SERVER") {
		t.Fatalf("after the new selection: %s", clip(pl, 1000))
	}
	// Pointing the selection back at the old directory is refused again.
	pointSelection(t, in, old.Path)
	if msg, _ := refusedWithin(t, bySel, 10*time.Second, "pane_list", nil); !strings.Contains(msg, "no registered instance") {
		t.Fatalf("selection of the old directory: %s", msg)
	}
}

func runTmux(sock string, args ...string) (string, error) {
	out, err := execCommand("tmux", append([]string{"-S", sock}, args...)...)
	return out, err
}

// pointSelection swaps the selection link to target atomically.
func pointSelection(t testing.TB, in *testenv.Instance, target string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(in.Layout.Selected()), ".test-link")
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, in.Layout.Selected()); err != nil {
		t.Fatal(err)
	}
}

func TestFaultSelectionSwitch(t *testing.T) {
	first := fixture(t)
	second := testenv.New(t, testenv.Options{Share: first, Profile: "hazard3-sim", Series: "demo", Card: "hello", Task: "2"})
	s := connect(t, first, "observe")
	a, b := studentOf(t, first), studentOf(t, second)
	a.waitPrompt(a.pane("shell"))
	b.waitPrompt(b.pane("shell"))
	a.run(a.pane("shell"), "echo I-AM-FIRST")
	b.run(b.pane("shell"), "echo I-AM-SECOND")
	a.waitPane(a.pane("shell"), "(?m)^I-AM-FIRST$", 10*time.Second)
	b.waitPane(b.pane("shell"), "(?m)^I-AM-SECOND$", 10*time.Second)

	check := func(in *testenv.Instance, want, notWant, title string) {
		t.Helper()
		out := okWithin(t, s, 10*time.Second, "session_status", nil)
		if str(out["instance"]) != in.Name || str(out["container_id"]) != in.Record.ContainerID {
			t.Fatalf("session_status after selecting %s: %v", in.Name, out)
		}
		if ti := s.ok("task_info", nil); str(ti["title"]) != title {
			t.Fatalf("task_info of %s: %v", in.Name, ti["title"])
		}
		text := str(s.ok("pane_capture", map[string]any{"pane": studentOf(t, in).pane("shell")})["text"])
		if !strings.Contains(text, want) || strings.Contains(text, notWant) {
			t.Fatalf("pane_capture after selecting %s: %q", in.Name, text)
		}
	}
	check(first, "I-AM-FIRST", "I-AM-SECOND", "Native C: count words (gdb)")
	second.Select(t)
	check(second, "I-AM-SECOND", "I-AM-FIRST", "RV32 on QEMU: C calls assembly")
	first.Select(t)
	check(first, "I-AM-FIRST", "I-AM-SECOND", "Native C: count words (gdb)")
}

func TestFaultSelectionNotAnInstance(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe")
	s.ok("session_status", nil)
	// A directory that looks like an instance's: container.json copied,
	// live tmux and nvim servers, but no registry record names it.
	fake := filepath.Join(filepath.Dir(in.Dir.Path), "0123456789ab")
	if err := os.MkdirAll(fake, 0o700); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(in.Dir.ContainerJSON())
	os.WriteFile(filepath.Join(fake, sockets.ContainerJSON), data, 0o600)
	if out, err := execCommand("tmux", "-S", filepath.Join(fake, sockets.TmuxSocket), "-f", "/dev/null", "new-session", "-d", "-s", "stem", "-n", "FAKE-SERVER"); err != nil {
		t.Fatalf("fake tmux: %v %s", err, out)
	}
	t.Cleanup(func() { execCommand("tmux", "-S", filepath.Join(fake, sockets.TmuxSocket), "kill-server") })
	for _, target := range []string{fake, in.Layout.Root(), filepath.Dir(in.Dir.Path), in.Dir.Path + "/../" + filepath.Base(fake), "/tmp", in.Dir.Path + "-x"} {
		pointSelection(t, in, target)
		msg, _ := refusedWithin(t, s, 10*time.Second, "pane_list", nil)
		if strings.Contains(msg, "FAKE-SERVER") {
			t.Fatalf("selection %s: the fake server's content: %s", target, msg)
		}
		if !strings.Contains(msg, "no registered instance") || !strings.Contains(msg, "stemctl mcp select") {
			t.Errorf("selection %s: %s", target, msg)
		}
	}
	// A link to a link to the real directory is not the real directory.
	hop := filepath.Join(in.Layout.Root(), "hop")
	os.Symlink(in.Dir.Path, hop)
	pointSelection(t, in, hop)
	if msg, _ := refusedWithin(t, s, 10*time.Second, "pane_list", nil); !strings.Contains(msg, "no registered instance") {
		t.Errorf("selection through a second link: %s", msg)
	}
	os.Remove(in.Layout.Selected())
	if msg, _ := refusedWithin(t, s, 10*time.Second, "pane_list", nil); !strings.Contains(msg, "stemctl mcp select") {
		t.Errorf("no selection: %s", msg)
	}
	in.Select(t)
	okWithin(t, s, 10*time.Second, "pane_list", nil)
}

func TestFaultUnknownInstance(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe", "--instance", "no-such-instance-t9")
	msg := s.refused("session_status", nil)
	if !strings.Contains(msg, "no-such-instance-t9") || !strings.Contains(msg, in.Name) {
		t.Fatalf("unknown --instance: %s", msg)
	}
	t.Logf("unknown instance: %s", msg)
	for _, tool := range []string{"pane_list", "nvim_status", "task_info"} {
		s.refused(tool, nil)
	}
	// A container id prefix names the instance too.
	byID := connect(t, in, "observe", "--instance", in.Record.ContainerID[:12])
	if out := byID.ok("session_status", nil); str(out["instance"]) != in.Name {
		t.Fatalf("--instance by container id: %v", out)
	}
}

// TestFaultCursorOfAnotherContainer: a pane_capture cursor names a pane
// and a line of one container's tmux. After the selection moves to another
// instance, or the instance's container is re-created, the same pane id
// exists again with other lines: the old cursor must be refused, saying to
// drop it, never silently select lines of another session.
func TestFaultCursorOfAnotherContainer(t *testing.T) {
	first := fixture(t)
	second := testenv.New(t, testenv.Options{Share: first, Profile: "hazard3-sim", Series: "demo", Card: "hello", Task: "2"})
	s := connect(t, first, "observe")
	a, b := studentOf(t, first), studentOf(t, second)
	pa, pb := a.pane("shell"), b.pane("shell")
	a.waitPrompt(pa)
	b.waitPrompt(pb)
	if pa != pb {
		t.Logf("the shell panes have different ids (%s, %s): the pane check alone would refuse", pa, pb)
	}
	following := func(in *testenv.Instance) {
		t.Helper()
		waitUntil(t, 10*time.Second, "the server follows to "+in.Name, func() bool {
			out, _, err := s.call("session_status", nil)
			return err == nil && str(out["container_id"]) == in.Record.ContainerID
		})
	}
	cursorOf := func(in *testenv.Instance, pane string) string {
		t.Helper()
		cur := str(s.ok("pane_capture", map[string]any{"pane": pane})["cursor"])
		if !regexp.MustCompile(`^c3:` + in.Record.ContainerID[:12] + `:[0-9a-f]{8}:` + pane + `:[0-9]+$`).MatchString(cur) {
			t.Fatalf("cursor %q is not of container %.12s and pane %s", cur, in.Record.ContainerID, pane)
		}
		return cur
	}
	refusedCursor := func(what, pane, cur string) {
		t.Helper()
		msg := s.refused("pane_capture", map[string]any{"pane": pane, "since": cur})
		if !strings.Contains(msg, "another session") || !strings.Contains(msg, "drop the cursor") {
			t.Fatalf("%s: the old cursor's refusal is unclear: %s", what, msg)
		}
	}

	// The selection moves to another instance.
	old := cursorOf(first, pa)
	second.Select(t)
	following(second)
	refusedCursor("after the selection switch", pb, old)
	cur := cursorOf(second, pb)
	b.run(pb, "echo AFTER-SWITCH")
	b.waitPane(pb, "(?m)^AFTER-SWITCH$", 10*time.Second)
	if text := str(s.ok("pane_capture", map[string]any{"pane": pb, "since": cur})["text"]); !strings.Contains(text, "AFTER-SWITCH") {
		t.Fatalf("a cursor of this container: %q", text)
	}

	// The instance's container is re-created: same name, same pane ids.
	first.Select(t)
	following(first)
	old = cursorOf(first, pa)
	first.Recreate(t, false)
	first.Select(t)
	following(first)
	np := a.pane("shell")
	a.waitPrompt(np)
	refusedCursor("after the container was re-created", np, old)
	cursorOf(first, np)
}
