package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/sockets"
)

// Lifecycle edges of agents in a window, with the real stemctl, stem-mcp,
// Podman and tmux: the container under the agent stopped, removed or
// re-created, two agents on one instance, the student closing the window,
// and the refusals that must leave nothing behind.

// fastEnd bounds how long an agent may outlive its container's tmux: well
// under the grace a closed window gets (3 s), so passing proves the agent
// ended because its session went, not because its window was missing.
const fastEnd = 2500 * time.Millisecond

// podmanRm removes a container behind stem's back.
func podmanRm(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "podman", "rm", "-f", "-t", "0", id).CombinedOutput(); err != nil {
		t.Fatalf("podman rm -f %s: %v\n%s", id, err, out)
	}
}

// waitEnded waits until both of an agent's processes are gone.
func waitEnded(t *testing.T, rec agentstore.Record, d time.Duration) {
	t.Helper()
	t0 := time.Now()
	for agentstore.Alive(rec.PID, rec.PIDStart) || agentstore.Alive(rec.ProviderPID, 0) {
		if time.Since(t0) > d {
			t.Fatalf("agent %s still runs %s later (supervisor %v, provider %v)", rec.ID, d,
				agentstore.Alive(rec.PID, rec.PIDStart), agentstore.Alive(rec.ProviderPID, 0))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listed is the agent's entry in `agent list --json`, or nil.
func (a *account) listed(id string) *agentstore.Status {
	a.t.Helper()
	for _, s := range a.agents() {
		if s.ID == id {
			return &s
		}
	}
	return nil
}

// notLive asserts that `agent list` stops presenting the agent as live in
// its window within settle (the supervisor's moment to notice): it is
// absent, or marked as ending, in the table too. Unnoticed, a closed
// window or a stopped container would leave it live for the 3 s grace;
// settle stays below that, with room for a loaded machine (each look is
// a stemctl run).
func (a *account) notLive(id string) {
	a.t.Helper()
	const settle = 2 * time.Second
	t0 := time.Now()
	for {
		s := a.listed(id)
		live := s != nil && s.Running && !strings.HasPrefix(s.Problem, "ending: ")
		if !live {
			break
		}
		if time.Since(t0) > settle {
			a.t.Fatalf("agent list still shows %s as live %s later (window %s, problem %q)", id, settle, s.Window, s.Problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, line := range strings.Split(a.must("agent", "list"), "\n") {
		if strings.HasPrefix(line, id+" ") && !strings.Contains(line, "ending: ") {
			a.t.Fatalf("agent list shows %s as live:\n%s", id, line)
		}
	}
}

// agentDirs are the agent directories left in the account.
func (a *account) agentDirs() []string {
	ents, _ := os.ReadDir(filepath.Join(a.Runtime, "stem", "agents"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (a *account) windows(st instanceInfo) string {
	return a.tmux(st, "list-windows", "-a", "-F", "#{window_id} #{window_name} #{pane_id}")
}

// The container under two agents is removed with `podman rm -f`: `agent
// stop` right away ends one with a clear outcome and no warning about a
// tmux it cannot reach; the other ends by itself at once; attach says what
// to run. Then an agent's container is re-created by `stemctl up`: the
// agent ends, and stopping it afterwards says it had ended and touches no
// window of the new container, not even one that carries its id.
func TestAgentEdgeContainerRemovedOrRecreated(t *testing.T) {
	a := newAccount(t)
	a.must("up", "native-amd64", "demo", "hello", "1")
	st := a.status(nativeInst)
	var x, y agentstore.Record
	a.mustJSON(&x, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
	a.mustJSON(&y, "agent", "attach", "helper", "--instance", nativeInst, "--background")
	a.waitReport(x.ID, 20*time.Second)
	a.waitReport(y.ID, 20*time.Second)

	podmanRm(t, st.Record.ContainerID)
	removed := time.Now()
	r, err := a.run("agent", "stop", x.ID)
	if err != nil || r.Code != 0 || !strings.Contains(r.Stdout, x.ID) || strings.Contains(r.Stderr, "warning") {
		t.Fatalf("agent stop after podman rm: exit %d %v\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "stopped agent "+x.ID) && !strings.Contains(r.Stdout, "had already ended: the instance's tmux server is gone") {
		t.Fatalf("agent stop after podman rm says:\n%s", r.Stdout)
	}
	// y, untouched, ends by itself: measured from the removal.
	waitEnded(t, y, max(fastEnd-time.Since(removed), 0))
	waitEnded(t, x, 5*time.Second)
	a.notLive(y.ID)
	if s := a.listed(x.ID); s != nil {
		t.Fatalf("agent list shows the stopped agent: %+v", *s)
	}
	r, _ = a.run("agent", "attach", "custom", "--instance", nativeInst)
	if r.Code == 0 || !strings.Contains(r.Stderr, "no longer exists: run `stemctl up native-amd64 demo hello 1") ||
		!strings.Contains(r.Stderr, "`stemctl agent start custom native-amd64 demo hello 1") {
		t.Fatalf("attach to a removed container: %d\n%s", r.Code, r.Stderr)
	}

	// Re-created: z runs on the new container, which is removed and made
	// again by `stemctl up`.
	a.must("up", "native-amd64", "demo", "hello", "1")
	var z agentstore.Record
	a.mustJSON(&z, "agent", "attach", "custom", "--instance", nativeInst, "--background")
	a.waitReport(z.ID, 20*time.Second)
	podmanRm(t, a.status(nativeInst).Record.ContainerID)
	a.must("up", "native-amd64", "demo", "hello", "1")
	st3 := a.status(nativeInst)
	waitEnded(t, z, fastEnd)
	// The new container's pane with z's pane id, even marked as z's, is
	// not z's window.
	var pane string
	for range 10 {
		if pane = strings.TrimSpace(a.tmux(st3, "new-window", "-d", "-P", "-F", "#{pane_id}")); pane == z.Pane {
			break
		}
	}
	if pane != z.Pane {
		t.Fatalf("could not make a pane %s in the new container (last %s)", z.Pane, pane)
	}
	a.tmux(st3, "set-option", "-p", "-t", pane, "@stem_agent", z.ID)
	before := a.windows(st3)
	r, err = a.run("agent", "stop", z.ID)
	if err != nil || r.Code != 0 || !strings.Contains(r.Stdout, "agent "+z.ID+" (custom on "+nativeInst+") had already ended: the instance's tmux server is gone") || r.Stderr != "" {
		t.Fatalf("agent stop after re-creation: exit %d %v\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	if after := a.windows(st3); after != before {
		t.Fatalf("agent stop changed the new container's windows:\n%s\nto:\n%s", before, after)
	}
	if sts := a.agents(); len(sts) != 0 || len(a.agentDirs()) != 0 {
		t.Fatalf("agents left: %+v %v", sts, a.agentDirs())
	}
}

// `stemctl rm` with an agent attached: the agent ends at once and its
// record does not linger.
func TestAgentEdgeRmWhileAttached(t *testing.T) {
	a := newAccount(t)
	var x agentstore.Record
	a.mustJSON(&x, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
	a.waitReport(x.ID, 20*time.Second)
	a.must("rm", nativeInst)
	a.notLive(x.ID)
	waitEnded(t, x, fastEnd)
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("agent list after rm: %+v", sts)
	}
	if d := a.agentDirs(); len(d) != 0 {
		t.Fatalf("agent directories left after rm: %v", d)
	}
	r, _ := a.run("agent", "attach", "custom", "--instance", nativeInst)
	if r.Code == 0 || !strings.Contains(r.Stderr, "no such instance") || !strings.Contains(r.Stderr, "`stemctl agent start custom PROFILE SERIES CARD TASK`") {
		t.Fatalf("attach to a removed instance: %d\n%s", r.Code, r.Stderr)
	}
}

// `stemctl down` then `up` with an agent attached: the agent ends with the
// session (agent list stops showing it as live at once), `up` does not
// bring it back, nothing of it is left in the socket directory, and a new
// agent attaches to the restarted session.
func TestAgentEdgeDownUp(t *testing.T) {
	a := newAccount(t)
	var x agentstore.Record
	a.mustJSON(&x, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
	a.waitReport(x.ID, 20*time.Second)
	st := a.status(nativeInst)
	a.must("down", nativeInst)
	a.notLive(x.ID)
	waitEnded(t, x, fastEnd)
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("agent list after down: %+v", sts)
	}
	r, _ := a.run("agent", "attach", "custom", "--instance", nativeInst)
	if r.Code == 0 || !strings.Contains(r.Stderr, "run `stemctl up native-amd64 demo hello 1") ||
		!strings.Contains(r.Stderr, "`stemctl agent start custom native-amd64 demo hello 1") {
		t.Fatalf("attach to a stopped instance: %d\n%s", r.Code, r.Stderr)
	}
	a.must("up", "native-amd64", "demo", "hello", "1")
	if st2 := a.status(nativeInst); st2.Record.ContainerID != st.Record.ContainerID || st2.State != "running" {
		t.Fatalf("up after down: %+v", st2)
	}
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("agent list after up: %+v", sts)
	}
	if left, _ := filepath.Glob(filepath.Join(st.Record.SocketDir, "a-*")); len(left) != 0 {
		t.Fatalf("agent sockets left: %v", left)
	}
	var y agentstore.Record
	a.mustJSON(&y, "agent", "attach", "helper", "--instance", nativeInst, "--background")
	a.waitReport(y.ID, 20*time.Second)
	a.tmux(st, "send-keys", "-t", y.Pane, "status", "Enter")
	a.waitPane(st, y.Pane, "status "+nativeInst+" <nil>", 10*time.Second)
}

// Two agents on one instance at different levels each get their level's
// tools; `--instance` takes the container id for attach, list and stop;
// stopping one (by provider) leaves the other running, with its
// window and a working MCP session. Then the student closes that window:
// `agent list` says at once that it is ending, and the agent ends.
func TestAgentEdgeTwoLevelsAndClosedWindow(t *testing.T) {
	a := newAccount(t)
	a.must("up", "native-amd64", "demo", "hello", "1")
	st := a.status(nativeInst)
	var obs, asst agentstore.Record
	a.mustJSON(&obs, "agent", "attach", "custom", "--instance", nativeInst, "--level", "observe", "--background")
	// --instance takes a container id (prefix) for attach, list and stop.
	cid := st.Record.ContainerID
	a.mustJSON(&asst, "agent", "attach", "helper", "--instance", cid[:12], "--level", "assist", "--background")
	for _, ref := range []string{nativeInst, cid, cid[:12]} {
		var sts []agentstore.Status
		a.mustJSON(&sts, "agent", "list", "--instance", ref)
		if len(sts) != 2 || sts[0].Instance != nativeInst || sts[1].Instance != nativeInst {
			t.Fatalf("agent list --instance %s: %+v", ref, sts)
		}
	}
	for _, c := range []struct {
		rec   agentstore.Record
		level mcpserver.Level
	}{{obs, mcpserver.Observe}, {asst, mcpserver.Assist}} {
		rep := a.waitReport(c.rec.ID, 20*time.Second)
		if got, want := sorted(rep.Tools), sorted(mcpserver.ToolNames(c.level)); !slices.Equal(got, want) {
			t.Errorf("%s at %s: tools %v, want %v", c.rec.Provider, c.level, got, want)
		}
		if str(rep.SessionStatus["level"]) != c.level.String() || rep.Env["STEM_AGENT_LEVEL"] != c.level.String() {
			t.Errorf("%s: session level %v, env %q", c.rec.Provider, rep.SessionStatus["level"], rep.Env["STEM_AGENT_LEVEL"])
		}
	}
	if slices.Equal(sorted(mcpserver.ToolNames(mcpserver.Observe)), sorted(mcpserver.ToolNames(mcpserver.Assist))) {
		t.Fatal("observe and assist have the same tools: the check above proves nothing")
	}

	out := a.must("agent", "stop", "--instance", cid[:12], "--provider", "custom")
	if !strings.Contains(out, "stopped agent "+obs.ID) || strings.Contains(out, asst.ID) {
		t.Fatalf("agent stop --provider custom:\n%s", out)
	}
	waitEnded(t, obs, time.Second)
	if out, err := podmanOut(t, "inspect", "--format", "{{.State.Running}}", asst.Sandbox); !agentstore.Alive(asst.PID, asst.PIDStart) || err != nil || strings.TrimSpace(out) != "true" {
		t.Fatalf("stopping one agent ended the other (its sandbox: %s %v)", out, err)
	}
	if w := a.windows(st); strings.Contains(w, obs.Window+" ") || !strings.Contains(w, asst.Window+" helper "+asst.Pane) {
		t.Fatalf("windows after stopping one agent:\n%s", w)
	}
	a.tmux(st, "send-keys", "-t", asst.Pane, "status", "Enter")
	a.waitPane(st, asst.Pane, "status "+nativeInst+" <nil>", 10*time.Second)
	if s := a.listed(asst.ID); s == nil || !s.Running || s.Problem != "" || len(a.agents()) != 1 {
		t.Fatalf("agent list after stopping one: %+v", a.agents())
	}

	// The student closes the window (not the pane): within the grace the
	// agent is listed as ending, then it ends and is gone from the list.
	closed := time.Now()
	a.tmux(st, "kill-window", "-t", asst.Window)
	for {
		s := a.listed(asst.ID)
		if s == nil || strings.Contains(s.Problem, "its window was closed") {
			break
		}
		if time.Since(closed) > 2*time.Second {
			t.Fatalf("agent list 2 s after the window was closed: running %v, window %s, problem %q", s.Running, s.Window, s.Problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := a.must("agent", "list"); agentstore.Alive(asst.PID, asst.PIDStart) && !strings.Contains(out, "ending: its window was closed") {
		t.Fatalf("agent list (table) while the agent ends:\n%s", out)
	}
	waitEnded(t, asst, 10*time.Second)
	if sts := a.agents(); len(sts) != 0 || len(a.agentDirs()) != 0 {
		t.Fatalf("agents after the window was closed: %+v %v", sts, a.agentDirs())
	}
	if w := strings.TrimSpace(a.windows(st)); strings.Count(w, "\n") != 0 || !strings.Contains(w, " edit ") {
		t.Fatalf("the student's windows after both agents:\n%s", w)
	}
}

// Refusals leave nothing behind: a provider program that is missing (from
// PATH, or a configured path) is named with what to install, for start and
// attach alike; a program that exists but cannot run is reported with its
// log, and its window and record are removed; attach to an unknown
// instance names what to run. No window, record or directory remains.
func TestAgentEdgeRefusalsLeaveNothing(t *testing.T) {
	a := newAccount(t)
	broken := filepath.Join(a.Base, "broken-agent")
	if err := os.WriteFile(broken, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(a.Base, "config", agentcli.ConfigFile)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, []byte(`
[providers.ghost]
command = ["/nonexistent/stem-ghost-agent"]
install = "pip install stem-ghost-agent"

[providers.broken]
command = ["`+broken+`"]
`)...)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	a.must("up", "native-amd64", "demo", "hello", "1")
	st := a.status(nativeInst)
	before := a.windows(st)

	for _, args := range [][]string{
		{"agent", "start", "ghost", "native-amd64", "demo", "hello", "1"},
		{"agent", "attach", "ghost", "--instance", nativeInst},
	} {
		r, _ := a.run(args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, `program "/nonexistent/stem-ghost-agent" not found`) || !strings.Contains(r.Stderr, "install it: pip install stem-ghost-agent") {
			t.Fatalf("%v: %d\n%s", args, r.Code, r.Stderr)
		}
	}
	r, _ := a.runEnv([]string{"PATH=" + bins(t) + ":/usr/bin:/bin"}, "agent", "attach", "codex", "--instance", nativeInst, "--here")
	if r.Code == 0 || !strings.Contains(r.Stderr, `program "codex" not found in PATH`) || !strings.Contains(r.Stderr, "npm install -g @openai/codex") {
		t.Fatalf("attach codex without codex: %d\n%s", r.Code, r.Stderr)
	}
	// The sandbox runs the host's program file: one it cannot execute is
	// refused before anything starts.
	r, _ = a.run("agent", "attach", "broken", "--instance", nativeInst)
	if r.Code == 0 || !strings.Contains(r.Stderr, "exec format error") {
		t.Fatalf("attach broken: %d\n%s", r.Code, r.Stderr)
	}
	r, _ = a.run("agent", "attach", "custom", "--instance", "no-such-instance")
	if r.Code == 0 || !strings.Contains(r.Stderr, `"no-such-instance" (known: `+nativeInst+")") || !strings.Contains(r.Stderr, "`stemctl agent start custom PROFILE SERIES CARD TASK`") {
		t.Fatalf("attach to an unknown instance: %d\n%s", r.Code, r.Stderr)
	}

	if after := a.windows(st); after != before {
		t.Fatalf("refused agents changed the windows:\n%s\nto:\n%s", before, after)
	}
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("refused agents are listed: %+v", sts)
	}
	if d := a.agentDirs(); len(d) != 0 {
		t.Fatalf("refused agents left directories: %v", d)
	}
	if left, _ := filepath.Glob(filepath.Join(st.Record.SocketDir, "a-*")); len(left) != 0 {
		t.Fatalf("refused agents left sockets: %v", left)
	}
}

// `agent start` on an instance that is not up refuses before it starts a
// container: Gemini's settings directory under a world-writable parent
// (/tmp, which `up` accepts), an unknown placeholder in a custom provider's
// command, and a runtime directory where t.sock fits but the agent's
// a-<id>.sock does not. Each leaves no container, no registry record and no
// agent record or directory.
func TestAgentEdgeStartRefusalsBeforeUp(t *testing.T) {
	a := newAccount(t)
	cfgPath := filepath.Join(a.Base, "config", agentcli.ConfigFile)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(bins(t), "mcpclient")
	cfg = append(cfg, []byte(`
[providers.gem]
adapter = "gemini"
command = ["`+client+`"]

[providers.typo]
command = ["`+client+`", "--mcp-config", "{mcp_cfg}"]
`)...)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// 50 bytes: t.sock's path is 95 bytes, a-<id>.sock's 102 (limit 100).
	long, err := os.MkdirTemp("/tmp", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(long) })
	longRT := filepath.Join(long, strings.Repeat("r", 50-len(long)-1))
	if err := os.Mkdir(longRT, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := len(filepath.Join(longRT, "stem/abcdef12/abcdef1234/0123456789ab", sockets.TmuxSocket)); n >= sockets.MaxPath {
		t.Fatalf("t.sock would not fit either (%d bytes): the case proves nothing", n)
	}

	task := []string{"native-amd64", "demo", "hello", "1"}
	for _, c := range []struct {
		name     string
		provider string
		rt       string
		want     []string
	}{
		{"gemini settings under /tmp", "gem", a.Runtime, []string{"Gemini CLI ignores settings files there"}},
		{"unknown placeholder", "typo", a.Runtime, []string{"unknown placeholder {mcp_cfg}"}},
		{"agent socket too long", "custom", longRT, []string{"a-", ".sock is", "over the 100-byte limit", "XDG_RUNTIME_DIR"}},
	} {
		env := []string{"XDG_RUNTIME_DIR=" + c.rt}
		r, _ := a.runEnv(env, append([]string{"agent", "start", c.provider}, task...)...)
		if r.Code == 0 {
			t.Fatalf("%s: agent start succeeded:\n%s", c.name, r.Stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Stderr, w) {
				t.Fatalf("%s: stderr lacks %q:\n%s", c.name, w, r.Stderr)
			}
		}
		a.nothingLeft(c.name, env, c.rt)
	}
}

// nothingLeft asserts that the account has no container (by its workspace
// label), no registry record, and no agent record or directory under rt.
func (a *account) nothingLeft(what string, env []string, rt string) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", "ps", "-a", "-q", "--filter", "label="+labels.Workspace+"="+a.WS).CombinedOutput()
	if err != nil {
		a.t.Fatalf("%s: podman ps: %v\n%s", what, err, out)
	}
	if ids := strings.TrimSpace(string(out)); ids != "" {
		a.t.Fatalf("%s: containers left: %s", what, ids)
	}
	r, err := a.runEnv(env, "list", "--json")
	var recs []json.RawMessage
	if err != nil || r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &recs) != nil {
		a.t.Fatalf("%s: stemctl list --json: %d %v\n%s%s", what, r.Code, err, r.Stdout, r.Stderr)
	}
	if len(recs) != 0 {
		a.t.Fatalf("%s: registry records left: %s", what, r.Stdout)
	}
	r, err = a.runEnv(env, "agent", "list", "--json")
	var sts []agentstore.Status
	if err != nil || r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &sts) != nil || len(sts) != 0 {
		a.t.Fatalf("%s: agent list --json: %d %v\n%s%s", what, r.Code, err, r.Stdout, r.Stderr)
	}
	if ents, _ := os.ReadDir(filepath.Join(rt, "stem", "agents")); len(ents) != 0 {
		a.t.Fatalf("%s: agent directories left: %v", what, ents)
	}
}

// `stemctl rm` stops the instance's agents itself, a --here agent too
// (it has no window whose closing would end it).
func TestAgentEdgeRmStopsHereAgent(t *testing.T) {
	a := newAccount(t)
	a.must("up", "native-amd64", "demo", "hello", "1")
	cmd := exec.Command(filepath.Join(bins(t), "stemctl"), "agent", "attach", "helper", "--instance", nativeInst, "--here")
	cmd.Env = a.Env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 90})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	go io.Copy(io.Discard, f)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if sts := a.agents(); len(sts) == 1 && sts[0].Mode == agentstore.ModeHere {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the --here agent never showed in agent list: %+v", a.agents())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := a.must("rm", nativeInst)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the --here agent still runs after rm (rm said %q)", out)
	}
	if sts := a.agents(); len(sts) != 0 {
		t.Fatalf("agent list after rm: %+v", sts)
	}
}
