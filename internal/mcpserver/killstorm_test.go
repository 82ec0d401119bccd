package mcpserver_test

// stem-mcp killed with SIGKILL at any moment of its work — while it
// starts, captures a pane, waits on a printing pane, reads a buffer or asks
// gdb — leaves the student's session as it was: the same tmux server,
// Neovim and gdb processes keep running and answer the next agent.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
)

// studentProcs are the session's processes, each with its start time (a
// pid reused by another process is not the same process).
type studentProcs map[string][2]string // part → pid, start time

// procStart is field 22 of /proc/PID/stat ("" when there is no process).
func procStart(pid string) string {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces: count from its end.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// childNamed is the first child of pid whose command is name. Each
// thread lists its own children, and a Go program forks from any thread.
func childNamed(pid, name string) string {
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*/children")
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(data)) {
			if comm, _ := os.ReadFile("/proc/" + c + "/comm"); strings.TrimSpace(string(comm)) == name {
				return c
			}
		}
	}
	return ""
}

func procsOf(t testing.TB, in *testenv.Instance, gdbPane string) studentProcs {
	t.Helper()
	pid := func(args ...string) string {
		return strings.TrimSpace(in.Tmux(t, append([]string{"display-message", "-p"}, args...)...))
	}
	p := studentProcs{}
	bridge := pid("-t", gdbPane, "#{pane_pid}")
	for part, id := range map[string]string{
		"tmux server": pid("#{pid}"),
		"Neovim":      pid("-t", "stem:edit", "#{pane_pid}"),
		"gdb":         childNamed(bridge, "gdb"),
	} {
		if id == "" || procStart(id) == "" {
			t.Fatalf("no %s process to watch (pid %q)", part, id)
		}
		p[part] = [2]string{id, procStart(id)}
	}
	return p
}

// gone names the parts whose process ended (or is another one now).
func (p studentProcs) gone() []string {
	var out []string
	for part, id := range p {
		if procStart(id[0]) != id[1] {
			out = append(out, part)
		}
	}
	return out
}

// stormCalls are the requests each killed stem-mcp is sent after its
// initialize: every part of the session is talked to.
func stormCalls(shell, printer string) []map[string]any {
	return []map[string]any{
		{"name": "pane_capture", "arguments": map[string]any{"pane": shell}},
		{"name": "pane_wait", "arguments": map[string]any{"pane": printer, "pattern": "^NEVER-PRINTED$", "timeout_ms": 250}},
		{"name": "nvim_buffer_read", "arguments": map[string]any{"path": "t1/words.c"}},
		{"name": "gdb_status", "arguments": map[string]any{}},
		{"name": "pane_list", "arguments": map[string]any{}},
		{"name": "nvim_status", "arguments": map[string]any{}},
		{"name": "gdb_frame", "arguments": map[string]any{"frame": 0}},
	}
}

// killMidWork starts stem-mcp, initializes it, sends it the calls, lets
// it answer `after` of them, then SIGKILLs it a random few hundred
// microseconds later. It returns how many of the calls were answered with
// a result (not an error) before the kill.
func killMidWork(t testing.TB, in *testenv.Instance, calls []map[string]any, after int, rng *rand.Rand) int {
	t.Helper()
	r := startRaw(t, in, "assist")
	defer r.cmd.Wait()
	kill := func() {
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // the moment of the kill, not a wait
		r.cmd.Process.Kill()
	}
	answer := func() (string, bool) {
		for line := range r.lines {
			if strings.Contains(line, `"id":`) {
				return line, true
			}
		}
		return "", false
	}
	r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-03-26", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "storm", "version": "1"}}})
	if after == 0 {
		kill() // while it starts
		return 0
	}
	if _, ok := answer(); !ok {
		t.Fatalf("stem-mcp ended before it answered initialize: %s", r.stderr.String())
	}
	r.sendJSON(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	for i, c := range calls {
		r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": c})
	}
	results := 0
	for range after - 1 {
		a, ok := answer()
		if !ok {
			break
		}
		if strings.Contains(a, `"result":`) && !strings.Contains(a, `"isError":true`) {
			results++
		}
	}
	kill()
	return results
}

// killStorm runs n kills against one instance with gdb and a printing
// pane, and returns the parts that ended (if any) after how many kills.
func killStorm(t testing.TB, n int) (kills int, gone []string) {
	t.Helper()
	in := fixture(t)
	makeTask(t, in)
	gdbPane := startBridge(t, in, "./hello")
	st := studentOf(t, in)
	shell := st.pane("shell")
	printer := strings.TrimSpace(in.Tmux(t, "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "stem:", "-n", "printer",
		// A batch five times a second keeps output in flight for pane_wait
		// without a storm of forks of its own.
		"exec sh -c 'while :; do seq 200; sleep 0.2; done'"))
	in.AllowPane(t, printer)
	in.AllowPane(t, shell)
	procs := procsOf(t, in, gdbPane)

	calls := stormCalls(shell, printer)
	results := 0
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for kills < n {
		rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		results += killMidWork(t, in, calls, rng.IntN(len(calls)+2), rng)
		kills++
		if gone = procs.gone(); len(gone) > 0 {
			return kills, gone
		}
	}
	// Control: the kills landed in the middle of answered work.
	t.Logf("%d tool results answered before the kills", results)
	if results < n/2 {
		t.Fatalf("only %d tool results in %d runs: the storm did not reach the calls", results, n)
	}
	// The next agent finds every part answering.
	s := connect(t, in, "assist")
	s.ok("pane_capture", map[string]any{"pane": shell})
	s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c"})
	if state := str(get(s.ok("gdb_status", nil), "status", "state")); state != "not-started" {
		t.Errorf("gdb_status after the storm: %q", state)
	}
	return kills, procs.gone()
}

// stemMCPKills is n, or STEM_MCP_KILLS when it is set.
func stemMCPKills(n int) int {
	if v, err := strconv.Atoi(os.Getenv("STEM_MCP_KILLS")); err == nil && v > 0 {
		return v
	}
	return n
}

func TestStemMCPKilledMidWorkLeavesTheSession(t *testing.T) {
	kills, gone := killStorm(t, stemMCPKills(60))
	t.Logf("%d SIGKILLs of stem-mcp mid-work; parts gone: %v", kills, gone)
	if len(gone) > 0 {
		t.Fatalf("after %d SIGKILLs of stem-mcp the student's %s ended", kills, strings.Join(gone, ", "))
	}
}

// TestStudentProcsSeeAnEnd is the control of the storm's check: a part
// that ends is reported gone, one started again in its place too.
func TestStudentProcsSeeAnEnd(t *testing.T) {
	in := fixture(t)
	makeTask(t, in)
	procs := procsOf(t, in, startBridge(t, in, "./hello"))
	if g := procs.gone(); len(g) != 0 {
		t.Fatalf("nothing ended yet, gone: %v", g)
	}
	in.KillNvim(t)
	in.StartNvim(t)
	if g := procs.gone(); fmt.Sprint(g) != "[Neovim]" {
		t.Fatalf("Neovim killed and started again: gone %v", g)
	}
}

// BenchmarkStemMCPKillStorm reports the kills and the parts ended.
func BenchmarkStemMCPKillStorm(b *testing.B) {
	for range b.N {
		kills, gone := killStorm(b, stemMCPKills(2000))
		b.ReportMetric(float64(kills), "sigkills")
		b.ReportMetric(float64(len(gone)), "parts-ended")
		b.Logf("%d SIGKILLs of stem-mcp mid-work; parts gone: %v", kills, gone)
	}
}
