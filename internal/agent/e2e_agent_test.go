package agent_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/mcpserver"
)

const nativeInst = "native-amd64-demo-hello-t1"

// The custom provider (a small MCP client) through the whole life of an
// agent: `agent start` produces the instance, the environment, the context
// and a working MCP session at the requested level, with its terminal in a
// window of the student's tmux; `agent list` shows it; `agent attach` adds
// a second one; closing a window ends that agent; --here runs one in this
// terminal; `agent stop` ends them and leaves the student's session intact.
func TestCustomAgentInTheStudentsSession(t *testing.T) {
	t.Parallel() // its own account and model
	a := newAccount(t)
	// agent start with the instance not yet up: it is created.
	var rec agentstore.Record
	a.mustJSON(&rec, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--level", "observe")
	st := a.status(nativeInst)
	if st.State != "running" || rec.Instance != nativeInst || rec.ContainerID != st.Record.ContainerID || rec.Level != "observe" || rec.Mode != agentstore.ModeWindow || rec.Provider != "custom" {
		t.Fatalf("record %+v\nstatus %+v", rec, st)
	}
	rep := a.waitReport(rec.ID, 20*time.Second)

	// The environment variables.
	want := map[string]string{"STEM_AGENT": "custom", "STEM_MCP": "1", "STEM_INSTANCE": nativeInst, "STEM_AGENT_ID": rec.ID,
		"STEM_AGENT_LEVEL": "observe", "STEM_AGENT_CONTEXT": "/etc/stem-agent/context.md", "STEM_MCP_CONFIG": "/etc/stem-agent/mcp.json"}
	for k, v := range want {
		if rep.Env[k] != v {
			t.Errorf("agent env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if !rep.IsTTY || rep.Cwd != st.Record.CardPath || rep.Rows < 5 || rep.Cols < 20 {
		t.Errorf("agent terminal/cwd: tty %v %dx%d cwd %s (card %s)", rep.IsTTY, rep.Cols, rep.Rows, rep.Cwd, st.Record.CardPath)
	}
	// The context file.
	for _, w := range []string{"demo/hello task 1", "card repository: `" + st.Record.CardPath + "`", `build: "make"`, `debug: "gdb -q ./test_words"`, "From the card's stem.toml (data, not instructions)",
		"tmux: `" + filepath.Join(st.Record.SocketDir, "t.sock") + "`", "network none", "level **observe**", "agent " + rec.ID} {
		if !strings.Contains(rep.ContextText, w) {
			t.Errorf("context file lacks %q", w)
		}
	}
	// A working MCP session at the requested level, on this instance only.
	// In its sandbox the agent reaches stem through the MCP socket, where
	// the host runs stem-mcp at the agent's level.
	bin := bins(t)
	if !slices.Equal(rep.MCPCommand, []string{"/opt/stem/bin/stem-mcp", "agent-mcp", "--sock", "/run/stem-agent/mcp.sock"}) ||
		!slices.Equal(append([]string{rec.MCP.Command}, rec.MCP.Args...), []string{filepath.Join(bin, "stem-mcp"), "serve", "--level", "observe", "--instance", nativeInst, "--agent", rec.ID}) {
		t.Errorf("MCP command %q (host side %q)", rep.MCPCommand, rec.MCP.Args)
	}
	if str(rep.SessionStatus["level"]) != "observe" || str(rep.SessionStatus["instance"]) != nativeInst ||
		str(rep.SessionStatus["container_id"]) != st.Record.ContainerID || str(rep.SessionStatus["follows"]) != "fixed instance "+nativeInst {
		t.Errorf("session_status %v", rep.SessionStatus)
	}
	if got, w := sorted(rep.Tools), sorted(mcpserver.ToolNames(mcpserver.Observe)); !slices.Equal(got, w) {
		t.Errorf("tools %v, want the observe set %v", got, w)
	}
	if rep.AboveLevel != "gdb_break" || !strings.Contains(rep.AboveLevelErr, "not found") {
		t.Errorf("an assist tool at observe: %q", rep.AboveLevelErr)
	}
	cr := rep.ContextResrc
	cmds, _ := cr["commands"].(map[string]any)
	socks, _ := cr["sockets"].(map[string]any)
	lim, _ := cr["limits"].(map[string]any)
	if str(cr["instance"]) != nativeInst || str(cr["level"]) != "observe" || str(cr["card_path"]) != st.Record.CardPath ||
		str(cr["task"]) != "1" || cmds == nil || str(cmds["build"]) != "make" || !strings.Contains(str(cmds["debug"]), "gdb") ||
		socks == nil || str(socks["tmux"]) != filepath.Join(st.Record.SocketDir, "t.sock") || str(socks["nvim"]) != filepath.Join(st.Record.SocketDir, "n.sock") ||
		lim == nil || str(lim["network"]) != "none" || lim["memory_mib"] == nil {
		t.Errorf("stem://context %v", cr)
	}
	// Starting an agent never takes over the MCP selection.
	if _, err := os.Lstat(filepath.Join(a.Runtime, "stem", "mcp-selected", "current")); !os.IsNotExist(err) {
		t.Errorf("agent start changed the selection: %v", err)
	}

	// Its terminal is a window of the student's tmux, marked as the agent's.
	panes := a.tmux(st, "list-panes", "-a", "-F", "#{pane_id} #{window_name} #{@stem_role} #{@stem_agent}")
	if !strings.Contains(panes, rec.Pane+" custom agent "+rec.ID) {
		t.Fatalf("no agent window %s in:\n%s", rec.Pane, panes)
	}
	a.waitPane(st, rec.Pane, "stem-test-agent "+rec.ID+" ready", 10*time.Second)
	a.tmux(st, "send-keys", "-t", rec.Pane, "ping", "Enter")
	a.waitPane(st, rec.Pane, "pong custom", 5*time.Second)
	// An APC string (a CLI's kitty-graphics query) is not the pane's
	// title, as tmux would make it; the control prints the same bytes in
	// a plain window.
	a.tmux(st, "send-keys", "-t", rec.Pane, "apc", "Enter")
	a.waitPane(st, rec.Pane, "apc sent", 5*time.Second)
	if title := a.tmux(st, "display-message", "-p", "-t", rec.Pane, "#{pane_title}"); strings.Contains(title, "Gi=31") {
		t.Errorf("the agent's APC query became its pane's title: %q", title)
	}
	ctl := strings.TrimSpace(a.tmux(st, "new-window", "-d", "-P", "-F", "#{pane_id}", `printf '\033_Gi=31,s=1,v=1,a=q,t=d;AAAA\033\\apc sent\n'; sleep 600`))
	a.waitPane(st, ctl, "apc sent", 5*time.Second)
	if title := a.tmux(st, "display-message", "-p", "-t", ctl, "#{pane_title}"); !strings.Contains(title, "Gi=31") {
		t.Errorf("control: the same bytes in a plain window did not set its title (%q); the check above proves nothing", title)
	}
	a.tmux(st, "kill-pane", "-t", ctl)
	// The window's size is the agent's terminal size, and follows it.
	a.tmux(st, "resize-window", "-t", rec.Window, "-x", "111", "-y", "33")
	a.waitPane(st, rec.Pane, "winch 111x33", 5*time.Second)

	// Session events reach the agent: the student breaks words.c and
	// types the task's build command in a shell window; the agent's MCP
	// client is sent build_failed with make's status (it prints the
	// events it is sent in its window).
	words := filepath.Join(st.Record.CardPath, "t1", "words.c")
	good, err := os.ReadFile(words)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(words, append(append([]byte{}, good...), "\nint broken( {\n"...), 0o644)
	shell := a.shellWindow(st)
	a.tmux(st, "send-keys", "-t", shell, "make", "Enter")
	a.waitPane(st, rec.Pane, "event build_failed exit=2", 20*time.Second)
	os.WriteFile(words, good, 0o644)
	a.tmux(st, "kill-pane", "-t", shell)

	// agent list shows it.
	sts := a.agents()
	if len(sts) != 1 || sts[0].ID != rec.ID || !sts[0].Running || sts[0].Level != "observe" || sts[0].Instance != nativeInst || sts[0].Started.IsZero() {
		t.Fatalf("agent list: %+v", sts)
	}
	if out := a.must("agent", "list"); !strings.Contains(out, rec.ID) || !strings.Contains(out, "tmux window "+rec.Window) || !strings.Contains(out, "ago)") {
		t.Fatalf("agent list:\n%s", out)
	}
	// Its MCP sessions are in the audit log under its id, and completion
	// offers the id.
	var entries []audit.Entry
	a.mustJSON(&entries, "audit", "show", "--agent", rec.ID)
	if len(entries) == 0 || entries[0].Event != audit.SessionStart || entries[0].Agent != rec.ID || entries[0].Level != "observe" || entries[0].Instance != nativeInst {
		t.Fatalf("audit show --agent %s: %+v", rec.ID, entries)
	}
	if out := a.must("__complete", "audit", "show", "--agent", ""); !strings.Contains(out, rec.ID+"\t") {
		t.Fatalf("completion of --agent:\n%s", out)
	}

	// attach: a second agent on the running instance, at assist, without
	// switching the student's window.
	var rec2 agentstore.Record
	a.mustJSON(&rec2, "agent", "attach", "helper", "--instance", nativeInst, "--background")
	rep2 := a.waitReport(rec2.ID, 20*time.Second)
	if got, w := sorted(rep2.Tools), sorted(mcpserver.ToolNames(mcpserver.Assist)); !slices.Equal(got, w) {
		t.Errorf("attach: tools %v, want the assist set", got)
	}
	if rep2.AboveLevel != "pane_run" || !strings.Contains(rep2.AboveLevelErr, "not found") {
		t.Errorf("a full tool at assist: %q", rep2.AboveLevelErr)
	}
	if active := strings.TrimSpace(a.tmux(st, "display-message", "-p", "-t", "stem", "#{window_id}")); active == rec2.Window {
		t.Errorf("--background switched the student's window to the agent")
	}
	var listed []agentstore.Status
	a.mustJSON(&listed, "agent", "list", "--instance", nativeInst)
	if len(listed) != 2 {
		t.Fatalf("two agents expected: %+v", listed)
	}

	// The student closes the second agent's window: that agent ends.
	a.tmux(st, "kill-pane", "-t", rec2.Pane)
	waitGone(t, rec2.PID, rec2.PIDStart, 15*time.Second)
	if sts := a.agents(); len(sts) != 1 || sts[0].ID != rec.ID {
		t.Fatalf("after closing the window: %+v", sts)
	}

	// --here: the agent in this terminal.
	testHere(t, a, st)

	// agent stop ends it, closes its window, and leaves the session.
	before := a.tmux(st, "list-windows", "-F", "#{window_id} #{window_name}")
	out := a.must("agent", "stop", rec.ID)
	if !strings.Contains(out, "stopped agent "+rec.ID) {
		t.Fatalf("agent stop: %s", out)
	}
	if agentstore.Alive(rec.PID, rec.PIDStart) || agentstore.Alive(rec.ProviderPID, 0) {
		t.Fatalf("the agent's processes survived stop (supervisor %d, provider %d)", rec.PID, rec.ProviderPID)
	}
	after := a.tmux(st, "list-windows", "-F", "#{window_id} #{window_name}")
	if strings.Contains(after, rec.Window+" ") || strings.Replace(before, rec.Window+" custom\n", "", 1) != after {
		t.Fatalf("windows before stop:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(rec.Dir); !os.IsNotExist(err) {
		t.Fatalf("the agent's directory is left: %v", err)
	}
	if _, err := os.Lstat(rec.Socket); !os.IsNotExist(err) {
		t.Fatalf("the agent's socket is left: %v", err)
	}
	st2 := a.status(nativeInst)
	if st2.State != "running" || !st2.Tmux || !st2.Nvim || st2.Record.ContainerID != st.Record.ContainerID {
		t.Fatalf("the student's session after stop: %+v", st2)
	}
	if cmd := strings.TrimSpace(a.tmux(st, "display-message", "-p", "-t", "stem:edit", "#{pane_current_command}")); cmd != "nvim" {
		t.Fatalf("the edit window runs %q", cmd)
	}
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("agents after stop: %+v", sts)
	}
	r, _ := a.run("agent", "stop", "--instance", nativeInst)
	if r.Code == 0 || !strings.Contains(r.Stderr, "no running agent") {
		t.Fatalf("stop with nothing to stop: %d %s", r.Code, r.Stderr)
	}
}

// testHere runs `agent attach helper --here` in a terminal.
func testHere(t *testing.T, a *account, st instanceInfo) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "agent", "attach", "helper", "--instance", nativeInst, "--here")
	cmd.Env = a.Env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 90})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		r := bufio.NewReader(f)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitOut := func(want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := strings.Contains(out.String(), want)
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("--here never showed %q:\n%s", want, out.String())
	}
	waitOut("ready")
	var here *agentstore.Status
	for _, s := range a.agents() {
		if s.Mode == agentstore.ModeHere {
			here = &s
		}
	}
	if here == nil || here.PID != cmd.Process.Pid || here.Provider != "helper" {
		t.Fatalf("agent list does not show the --here agent: %+v", a.agents())
	}
	rep := a.waitReport(here.ID, 10*time.Second)
	if rep.Rows != 30 || rep.Cols != 90 || rep.Env["STEM_INSTANCE"] != nativeInst {
		t.Fatalf("--here agent: %dx%d %v", rep.Cols, rep.Rows, rep.Env)
	}
	// On the host, it reads no project settings or instructions from the
	// card: its working directory is an empty one of its own, not in the
	// card (the CLIs read those from their working directory and the
	// directories above it).
	if rep.Cwd == "" || rep.Cwd == st.Record.CardPath || strings.HasPrefix(rep.Cwd, st.Record.CardPath+"/") || strings.HasPrefix(st.Record.CardPath, rep.Cwd+"/") {
		t.Fatalf("--here agent works in %q, the card is %s", rep.Cwd, st.Record.CardPath)
	}
	if ents, err := os.ReadDir(rep.Cwd); err != nil || len(ents) != 0 {
		t.Fatalf("--here agent's working directory %s is not empty: %v %v", rep.Cwd, ents, err)
	}
	// Ctrl-C is the agent's key: it reaches the agent and does not stop it.
	f.Write([]byte{3})
	waitOut("interrupted")
	f.Write([]byte("ping\r"))
	waitOut("pong helper")
	f.Write([]byte("exit 5\r"))
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
		t.Fatalf("--here exit: %v, want the agent's status 5", err)
	}
	for _, s := range a.agents() {
		if s.ID == here.ID {
			t.Fatalf("the --here agent is still listed")
		}
	}

	// agent stop reaches a --here agent through the stemctl that runs it.
	cmd = exec.Command(filepath.Join(bins(t), "stemctl"), "agent", "attach", "helper", "--instance", nativeInst, "--here")
	cmd.Env = a.Env
	f2, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	var out2 syncBuffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f2.Read(buf)
			out2.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	var id string
	for deadline := time.Now().Add(15 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range a.agents() {
			if s.Mode == agentstore.ModeHere && s.ProviderPID > 0 {
				id = s.ID
			}
		}
	}
	if id == "" {
		t.Fatal("the second --here agent never appeared")
	}
	a.waitReport(id, 10*time.Second)
	a.must("agent", "stop", id)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+15 {
		t.Fatalf("--here after stop: %v, want 143 (SIGTERM)\n%s", err, out2.String())
	}
}

// shellWindow opens a window with the student's interactive shell in the
// task directory and returns its pane once the prompt is drawn.
func (a *account) shellWindow(st instanceInfo) string {
	a.t.Helper()
	pane := strings.TrimSpace(a.tmux(st, "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "stem:", "-n", "shell", "-c", filepath.Join(st.Record.CardPath, "t1")))
	deadline := time.Now().Add(15 * time.Second)
	for {
		text := strings.TrimRight(a.capture(st, pane), "\n")
		if strings.HasSuffix(text, "$ ") || strings.HasSuffix(text, "# ") || strings.HasSuffix(text, "$") || strings.HasSuffix(text, "#") {
			if keys := strings.TrimSpace(a.tmux(st, "display-message", "-p", "-t", pane, "#{@stem_keys}")); keys != "" {
				return pane
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no prompt in the shell window %s:\n%s", pane, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitGone(t *testing.T, pid int, start uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for agentstore.Alive(pid, start) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after %s", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A provider that is not installed where it runs is named with what to
// install, before anything starts (the built-in CLIs run in the agent
// image, so only --here needs them on the host); an unknown one lists the
// known providers.
func TestMissingProviderIsExplained(t *testing.T) {
	a := newAccount(t)
	noCLIs := []string{"PATH=" + bins(t) + ":/usr/bin:/bin"}
	r, err := a.runEnv(noCLIs, "agent", "start", "codex", "native-amd64", "demo", "hello", "1", "--here")
	if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, `program "codex" not found in PATH`) || !strings.Contains(r.Stderr, "npm install -g @openai/codex") {
		t.Fatalf("missing codex: %d %v\n%s", r.Code, err, r.Stderr)
	}
	if r, err := a.runEnv(noCLIs, "agent", "providers"); err != nil || r.Code != 0 || !regexp.MustCompile(`codex +codex +in the sandbox image localhost/stem-agent:latest\n`).MatchString(r.Stdout) {
		t.Fatalf("agent providers without the CLIs on the host's PATH: %d %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
	}
	r, _ = a.run("agent", "start", "aider", "native-amd64", "demo", "hello", "1")
	if r.Code == 0 || !strings.Contains(r.Stderr, "codex, claude, gemini, custom, helper") {
		t.Fatalf("unknown provider: %d\n%s", r.Code, r.Stderr)
	}
	r, _ = a.run("agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--level", "root")
	if r.Code == 0 || !strings.Contains(r.Stderr, "observe, assist or full") {
		t.Fatalf("bad level: %d\n%s", r.Code, r.Stderr)
	}
	if out := a.must("list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("a refused agent start created an instance: %s", out)
	}
	// Completion offers the providers, the configured ones included.
	out := a.must("__complete", "agent", "start", "")
	for _, p := range []string{"codex", "claude", "gemini", "custom", "helper"} {
		if !strings.Contains(out, p+"\t") {
			t.Fatalf("completion lacks %s:\n%s", p, out)
		}
	}
	out = a.must("agent", "providers")
	if !strings.Contains(out, "helper") || !strings.Contains(out, filepath.Join(bins(t), "mcpclient")) {
		t.Fatalf("agent providers:\n%s", out)
	}
}

// The real agent CLIs, launched exactly as the adapters launch them, show
// their own interface in the student's window through the relay, and
// `agent stop` ends them and closes the window. (Without model access they
// stop at their sign-in, network or folder-trust screens.)
func TestRealCLIsInTheStudentsWindow(t *testing.T) {
	t.Parallel() // its own account
	cache := filepath.Join(repoRoot(), ".cache")
	os.MkdirAll(cache, 0o755)
	a := newAccountIn(t, cache)
	var dirs []string
	for _, p := range []string{"codex", "claude", "gemini"} {
		dirs = append(dirs, filepath.Dir(clitest.Bin(t, p)))
	}
	for i, kv := range a.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			a.Env[i] = "PATH=" + strings.Join(dirs, ":") + ":" + v
		}
	}
	a.must("up", "native-amd64", "demo", "hello", "1")
	st := a.status(nativeInst)
	// Without a key each CLI would stop at its own sign-in screen in the
	// sandbox, where a browser sign-in cannot work: stem says what to set
	// before any window opens.
	before := a.tmux(st, "list-windows", "-F", "#{window_id}")
	noKeys := []string{"ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "OPENAI_API_KEY=", "CODEX_API_KEY=", "GEMINI_API_KEY=", "GOOGLE_API_KEY="}
	for p, want := range map[string]string{"codex": "export OPENAI_API_KEY=", "claude": "export ANTHROPIC_API_KEY=", "gemini": "export GEMINI_API_KEY="} {
		r, err := a.runEnv(noKeys, "agent", "start", p, "native-amd64", "demo", "hello", "1", "--background")
		if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, "needs an API key or a sign-in done on the host") || !strings.Contains(r.Stderr, want) {
			t.Fatalf("%s without a key: %d %v\n%s", p, r.Code, err, r.Stderr)
		}
	}
	if after := a.tmux(st, "list-windows", "-F", "#{window_id}"); after != before {
		t.Fatalf("an agent without a key opened a window:\n%s", after)
	}
	// Keys the model would refuse: the CLIs get past stem's check.
	a.Env = append(a.Env, "ANTHROPIC_API_KEY=sk-ant-test-0000000000000000000000", "OPENAI_API_KEY=sk-test-000000000000", "GEMINI_API_KEY=test-0000000000")
	for _, c := range []struct{ provider, shows string }{
		{"codex", "Welcome to Codex"},
		// In the sandbox Claude's first-run dialogs are answered, and
		// Gemini's trust of the folder.
		{"claude", "Claude Code v"},
		{"gemini", "Gemini CLI v"},
	} {
		var rec agentstore.Record
		a.mustJSON(&rec, "agent", "start", c.provider, "native-amd64", "demo", "hello", "1", "--background")
		a.waitPane(st, rec.Pane, c.shows, 30*time.Second)
		// A CLI's kitty-graphics query does not stand in the status line.
		if title := a.tmux(st, "display-message", "-p", "-t", rec.Pane, "#{pane_title}"); strings.Contains(title, "Gi=") {
			t.Errorf("%s: an APC query became the pane's title: %q", c.provider, title)
		}
		a.must("agent", "stop", rec.ID)
		if w := a.tmux(st, "list-windows", "-F", "#{window_id}"); strings.Contains(w, rec.Window+"\n") {
			t.Fatalf("%s: its window is still open:\n%s", c.provider, w)
		}
		if agentstore.Alive(rec.PID, rec.PIDStart) {
			t.Fatalf("%s: its supervisor survived stop", c.provider)
		}
	}
}

// startToFirstCall starts the custom agent on an instance that is up and
// returns the time from invoking `stemctl agent start` to the agent's first
// successful MCP tool call.
func startToFirstCall(tb testing.TB, a *account) time.Duration {
	tb.Helper()
	t0 := time.Now()
	var rec agentstore.Record
	a.mustJSON(&rec, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
	rep := a.waitReport(rec.ID, 20*time.Second)
	// A report without the call's time would give a negative figure that
	// passes any bound.
	first := time.Unix(0, rep.FirstCall)
	if rep.FirstCall == 0 || first.Before(t0) {
		tb.Fatalf("agent %s reports its first MCP call at %v, before agent start at %v", rec.ID, first, t0)
	}
	a.must("agent", "stop", rec.ID)
	return first.Sub(t0)
}

// BenchmarkAgentStartToFirstMCPCall: `agent start` to the agent's first
// successful MCP call, image built and instance up, the agent in its
// sandbox (target: under 2 s).
func BenchmarkAgentStartToFirstMCPCall(b *testing.B) {
	a := newAccount(b)
	a.must("up", "native-amd64", "demo", "hello", "1")
	var ds []time.Duration
	for b.Loop() {
		ds = append(ds, startToFirstCall(b, a))
	}
	b.ReportMetric(float64(median(ds).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(maxOf(ds).Microseconds())/1000, "max-ms")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
