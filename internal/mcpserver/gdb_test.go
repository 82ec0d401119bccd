package mcpserver_test

// The gdb tools against a real gdb under the real bridge (stem-mcp
// gdb-bridge) in a fixture tmux window, with the student typing in gdb's
// pane, and the gdb_stopped notification latency.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
)

const spinC = `volatile unsigned long spins;
int main(void)
{
    for (;;)
        spins++;
}
`

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startBridge runs gdb under stem-mcp gdb-bridge in a new "gdb" window, as
// the debug layout does, and waits for g.sock and gdb's prompt.
func startBridge(t testing.TB, in *testenv.Instance, prog string) string {
	t.Helper()
	cmd := fmt.Sprintf("exec %s gdb-bridge --dir %s -- gdb -q -nx %s", shq(stemMCP(t)), shq(in.Dir.Path), shq(prog))
	pane := strings.TrimSpace(in.Tmux(t, "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "stem:", "-n", "gdb", "-c", in.Resolved.TaskDir, cmd))
	in.Tmux(t, "set", "-p", "-t", pane, "@stem_role", "gdb")
	waitUntil(t, 15*time.Second, "g.sock from the bridge", func() bool {
		fi, err := os.Lstat(in.Dir.GDB())
		return err == nil && fi.Mode()&os.ModeSocket != 0
	})
	// The bridge may log after the first prompt.
	studentOf(t, in).waitPane(pane, `(?m)^\(gdb\) `, 30*time.Second)
	return pane
}

// stopNotes records gdb_stopped / gdb_program_exited notifications with
// their arrival time.
type stopNote struct {
	at time.Time
	ev map[string]any
}

func watchStops(s *session) chan stopNote {
	ch := make(chan stopNote, 256)
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		at := time.Now()
		if n.Method != "notifications/message" || n.Params.AdditionalFields["logger"] != "stem.events" {
			return
		}
		var ev map[string]any
		b, _ := json.Marshal(n.Params.AdditionalFields["data"])
		json.Unmarshal(b, &ev)
		if t := str(ev["type"]); t == "gdb_stopped" || t == "gdb_program_exited" {
			ch <- stopNote{at, ev}
		}
	})
	return ch
}

func nextStop(t *testing.T, ch chan stopNote, typ string, timeout time.Duration) stopNote {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case n := <-ch:
			if str(n.ev["type"]) == typ {
				return n
			}
		case <-deadline:
			t.Fatalf("no %s notification within %v", typ, timeout)
		}
	}
}

func drain(ch chan stopNote) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func statusOf(t *testing.T, out map[string]any) (state, fn string, line int) {
	t.Helper()
	st := out["status"]
	return str(get(st, "state")), str(get(st, "frame", "func")), num(get(st, "frame", "line"))
}

func TestGDBTools(t *testing.T) {
	testenv.Require(t, "gdb")
	in := fixture(t)
	st := studentOf(t, in)
	makeTask(t, in)
	if err := os.WriteFile(filepath.Join(in.Resolved.TaskDir, "spin.c"), []byte(spinC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(in.Resolved.TaskDir, "spin"), filepath.Join(in.Resolved.TaskDir, "spin.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc spin.c: %v\n%s", err, out)
	}
	obs := connect(t, in, "observe")
	as := connect(t, in, "assist")
	fu := connect(t, in, "full")
	stops := watchStops(as)

	if out := obs.ok("gdb_status", nil); str(out["state"]) != "no-debugger" {
		t.Fatalf("gdb_status before the debugger starts: %v", out)
	}
	gp := startBridge(t, in, "./hello")

	t.Run("before run", func(t *testing.T) {
		obs := obs.sub(t)
		as := as.sub(t)
		var out map[string]any
		waitUntil(t, 10*time.Second, "gdb_status sees the debugger", func() bool {
			out = obs.ok("gdb_status", nil)
			return str(get(out, "status", "state")) == "not-started"
		})
		checkNotice(t, "gdb_status", out)
		br := as.ok("gdb_break", map[string]any{"location": "count_words"})
		if !strings.Contains(mustJSON(br["result"]), `"func":"count_words"`) || !strings.Contains(mustJSON(br["result"]), `"number":"1"`) {
			t.Fatalf("gdb_break count_words: %v", br)
		}
		br = as.ok("gdb_break", map[string]any{"location": "hello.c:12"})
		if !strings.Contains(mustJSON(br["result"]), `"line":"12"`) {
			t.Fatalf("gdb_break hello.c:12: %v", br)
		}
		// The student sees the breakpoints in their gdb.
		st.run(gp, "info breakpoints")
		st.waitPane(gp, `(?s)1\s+breakpoint\s+keep\s+y.*in count_words at words.c.*2\s+breakpoint.*hello.c:12`, 10*time.Second)
		for _, bad := range []string{"main if system(\"touch /tmp/x\")", "main; shell touch x", "-source x", "*$pc", "words.c:1 thread 1", ""} {
			as.refused("gdb_break", map[string]any{"location": bad})
		}
	})

	t.Run("student runs, agent steps", func(t *testing.T) {
		obs := obs.sub(t)
		as := as.sub(t)
		drain(stops)
		st.run(gp, "run")
		n := nextStop(t, stops, "gdb_stopped", 20*time.Second)
		if str(get(n.ev, "gdb", "reason")) != "breakpoint-hit" || str(get(n.ev, "gdb", "frame", "func")) != "count_words" {
			t.Fatalf("first stop: %v", n.ev)
		}
		out := obs.ok("gdb_status", map[string]any{"registers": true})
		state, fn, line := statusOf(t, out)
		if state != "stopped" || fn != "count_words" || line != 15 {
			t.Fatalf("gdb_status at the breakpoint: %s", clip(mustJSON(out), 1500))
		}
		bt := mustSlice(get(out, "status", "backtrace"))
		if len(bt) != 2 || str(get(bt[1], "func")) != "main" {
			t.Fatalf("backtrace: %v", bt)
		}
		if !strings.Contains(mustJSON(get(out, "status", "registers")), `"name":"rip"`) {
			t.Fatalf("registers: %s", clip(mustJSON(get(out, "status", "registers")), 500))
		}

		out = as.ok("gdb_next", nil)
		if str(get(out, "event", "reason")) != "end-stepping-range" {
			t.Fatalf("gdb_next: %v", out)
		}
		if _, _, l := statusOf(t, out); l != 16 {
			t.Fatalf("gdb_next went to line %d, want 16: %v", l, out)
		}
		// The student's pane shows where the agent's step left the program.
		st.waitPane(gp, `16\s+int in_word = 0;`, 10*time.Second)
		as.ok("gdb_next", nil)
		out = as.ok("gdb_step", nil)
		if _, fn, _ := statusOf(t, out); fn != "count_words" {
			t.Fatalf("gdb_step: %v", out)
		}

		pr := as.ok("gdb_print", map[string]any{"expression": "s"})
		if !strings.Contains(str(pr["value"]), `"the quick brown fox"`) {
			t.Fatalf("gdb_print s: %v", pr)
		}
		checkNotice(t, "gdb_print", pr)
		pr = as.ok("gdb_print", map[string]any{"expression": "*s"})
		if !strings.Contains(str(pr["value"]), `116 't'`) {
			t.Fatalf("gdb_print *s: %v", pr)
		}
		// words is still 0 on entry.
		pr = as.ok("gdb_print", map[string]any{"expression": "words + 40"})
		if strings.TrimSpace(str(pr["value"])) != "40" {
			t.Fatalf("gdb_print words + 40: %v", pr)
		}
		for _, bad := range []string{"count_words(s)", "words = 5", "words++", "$_shell(\"touch /tmp/x\")", "is_separator(' ')", "s; shell touch x"} {
			msg := as.refused("gdb_print", map[string]any{"expression": bad})
			if !strings.Contains(msg, "refused") {
				t.Errorf("gdb_print %q: %s", bad, msg)
			}
		}
		if pr := as.ok("gdb_print", map[string]any{"expression": "words"}); strings.TrimSpace(str(pr["value"])) != "0" {
			t.Fatalf("a refused assignment changed words: %v", pr)
		}

		out = as.ok("gdb_frame", map[string]any{"frame": 1})
		if _, fn, _ := statusOf(t, out); fn != "main" {
			t.Fatalf("gdb_frame 1: %v", out)
		}
		if pr := as.ok("gdb_print", map[string]any{"expression": "name"}); !strings.Contains(str(pr["value"]), `"stem"`) {
			t.Fatalf("gdb_print name in main's frame: %v", pr)
		}
		as.ok("gdb_frame", map[string]any{"frame": 0})
		out = as.ok("gdb_finish", nil)
		if str(get(out, "event", "reason")) != "function-finished" {
			t.Fatalf("gdb_finish: %v", out)
		}
		if _, fn, _ := statusOf(t, out); fn != "main" {
			t.Fatalf("gdb_finish returned to %q: %v", fn, out)
		}
		// hello.c:12 is the next breakpoint.
		out = as.ok("gdb_continue", nil)
		if str(get(out, "event", "reason")) != "breakpoint-hit" {
			t.Fatalf("gdb_continue to hello.c:12: %v", out)
		}
		drain(stops)
		out = as.ok("gdb_continue", nil)
		if str(get(out, "event", "kind")) != "exited" || str(get(out, "event", "reason")) != "exited-normally" {
			t.Fatalf("gdb_continue to the end: %v", out)
		}
		nextStop(t, stops, "gdb_program_exited", 5*time.Second)
		if out := obs.ok("gdb_status", nil); str(get(out, "status", "state")) != "exited" {
			t.Fatalf("gdb_status after the exit: %v", out)
		}
	})

	t.Run("gdb_command at full", func(t *testing.T) {
		fu := fu.sub(t)
		out := fu.ok("gdb_command", map[string]any{"command": "info breakpoints"})
		if !strings.Contains(str(out["output"]), "count_words") {
			t.Fatalf("info breakpoints: %v", out)
		}
		out = fu.ok("gdb_command", map[string]any{"command": "print 6*7"})
		if !strings.Contains(str(out["output"]), "= 42") {
			t.Fatalf("print 6*7: %v", out)
		}
		if msg := fu.refused("gdb_command", map[string]any{"command": "nosuchgdbcommand"}); !strings.Contains(msg, "Undefined command") {
			t.Errorf("bad gdb command: %s", msg)
		}
	})

	t.Run("gdb_stopped for every stop", func(t *testing.T) {
		fu := fu.sub(t)
		direct, err := gdbmi.Dial(context.Background(), in.Dir.GDB())
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		var mu sync.Mutex
		var directStops []time.Time
		go func() {
			for ev := range direct.Events() {
				if ev.Kind == gdbmi.EventStopped {
					mu.Lock()
					directStops = append(directStops, ev.Received)
					mu.Unlock()
				}
			}
		}()
		drain(stops)
		st.run(gp, "run")
		nextStop(t, stops, "gdb_stopped", 20*time.Second)
		var fromSync, fromPeer []time.Duration
		for i := 0; i < 12; i++ {
			before, _ := gdbmi.ReadSync(in.Dir.Path)
			mu.Lock()
			nDirect := len(directStops)
			mu.Unlock()
			st.run(gp, "next")
			n := nextStop(t, stops, "gdb_stopped", 10*time.Second)
			var sync gdbmi.SyncState
			waitUntil(t, 5*time.Second, "gdb-sync.json records the stop", func() bool {
				sync, _ = gdbmi.ReadSync(in.Dir.Path)
				return sync.Seq > before.Seq && sync.State == gdbmi.StateStopped
			})
			fromSync = append(fromSync, n.at.Sub(sync.Updated))
			waitUntil(t, 5*time.Second, "the peer client sees the stop", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(directStops) > nDirect
			})
			mu.Lock()
			fromPeer = append(fromPeer, n.at.Sub(directStops[nDirect]))
			mu.Unlock()
		}
		med := func(d []time.Duration) (time.Duration, time.Duration) {
			s := append([]time.Duration(nil), d...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return s[len(s)/2], s[len(s)-1]
		}
		m1, x1 := med(fromSync)
		m2, x2 := med(fromPeer)
		// Logged, not held to the 50 ms target: make bench measures it
		// (BenchmarkGDBStopToNotification).
		t.Logf("gdb stop -> gdb_stopped notification at the MCP client, %d stops: from the bridge's stop record: median %v, max %v; from a peer g.sock client's receipt: median %v, max %v",
			len(fromSync), m1, x1, m2, x2)
		fu.ok("gdb_command", map[string]any{"command": "kill"})
	})

	t.Run("interrupt", func(t *testing.T) {
		obs := obs.sub(t)
		as := as.sub(t)
		fu := fu.sub(t)
		fu.ok("gdb_command", map[string]any{"command": "delete"})
		fu.ok("gdb_command", map[string]any{"command": "file ./spin"})
		drain(stops)
		st.run(gp, "run")
		st.waitPane(gp, `Starting program: .*/spin`, 10*time.Second)
		var out map[string]any
		waitUntil(t, 10*time.Second, "the program runs", func() bool {
			out = obs.ok("gdb_status", nil)
			return str(get(out, "status", "state")) == "running"
		})
		if msg := as.refused("gdb_continue", nil); !strings.Contains(msg, "running") {
			t.Fatalf("gdb_continue on a running program: %s", msg)
		}
		// The program may still be in the dynamic loader the first time
		// (longer on a loaded machine): try for 10 s.
		deadline := time.Now().Add(10 * time.Second)
		for {
			time.Sleep(300 * time.Millisecond)
			out = as.ok("gdb_interrupt", nil)
			if str(get(out, "event", "signal")) != "SIGINT" || str(get(out, "event", "reason")) != "signal-received" {
				t.Fatalf("gdb_interrupt: %v", out)
			}
			state, fn, _ := statusOf(t, obs.ok("gdb_status", nil))
			if state != "stopped" {
				t.Fatalf("after gdb_interrupt: %s %s", state, fn)
			}
			if fn == "main" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gdb_interrupt keeps stopping outside main for 10 s: %s", fn)
			}
			as.ok("gdb_continue", map[string]any{"wait_ms": 0})
		}
		pr := as.ok("gdb_print", map[string]any{"expression": "spins"})
		if v := strings.TrimSpace(str(pr["value"])); v == "" || v == "0" {
			t.Fatalf("spins after running: %v", pr)
		}
		fu.ok("gdb_command", map[string]any{"command": "kill"})
	})
}

// startedC creates the file named by CANARY when it runs: its presence
// means the program was started.
const startedC = `#include <stdio.h>
int main(void)
{
    FILE *f = fopen(CANARY, "w");
    if (f)
        fclose(f);
    return 0;
}
`

// TestGDBNeverStartsTheProgram: at assist the run-control tools (and names
// like run or start as a location or expression) must not start the
// program, neither before the student ran it nor after it exited. gdb's
// `run` would start it through the student's shell (startup-with-shell),
// which is a shell command in all but name.
func TestGDBNeverStartsTheProgram(t *testing.T) {
	testenv.Require(t, "gdb")
	in := fixture(t)
	st := studentOf(t, in)
	canary := filepath.Join(t.TempDir(), "started")
	src := filepath.Join(in.Resolved.TaskDir, "started.c")
	if err := os.WriteFile(src, []byte(startedC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-g", "-O0", `-DCANARY="`+canary+`"`, "-o", filepath.Join(in.Resolved.TaskDir, "started"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc started.c: %v\n%s", err, out)
	}
	as := connect(t, in, "assist")
	gp := startBridge(t, in, "./started")
	starts, barrier := 0, 40 // the student's runs so far; the last barrier
	notStarted := func(when, state string) {
		t.Helper()
		// A barrier through the student's gdb: it reads the next console
		// line only once a program it ran in the foreground has ended
		// (this one ends at once, after creating the canary), and prints
		// in order after any "Starting program". The typed line shows
		// BARRIER-%d, the output BARRIER-N.
		barrier++
		st.run(gp, fmt.Sprintf(`printf "BARRIER-%%d\n", %d`, barrier))
		text := st.waitPane(gp, fmt.Sprintf(`(?m)^BARRIER-%d$`, barrier), 20*time.Second)
		if n := strings.Count(text, "Starting program"); n != starts {
			t.Fatalf("%s: the program was started (%d starts, the student made %d):\n%s", when, n, starts, lastLines(text, 20))
		}
		if _, err := os.Lstat(canary); err == nil {
			t.Fatalf("%s: the program was started (%s exists)", when, canary)
		}
		if got := str(get(as.ok("gdb_status", nil), "status", "state")); got != state {
			t.Fatalf("%s: gdb_status state %q, want %q", when, got, state)
		}
	}
	try := func(when, state string) {
		t.Helper()
		waitUntil(t, 10*time.Second, "gdb_status says "+state, func() bool {
			return str(get(as.ok("gdb_status", nil), "status", "state")) == state
		})
		for _, tool := range []string{"gdb_continue", "gdb_step", "gdb_next", "gdb_finish"} {
			for _, wait := range []int{0, 500} {
				msg := as.refused(tool, map[string]any{"wait_ms": wait})
				if !strings.Contains(msg, "no program to control") || !strings.Contains(msg, "never starts") {
					t.Errorf("%s: %s wait_ms=%d: unclear error: %s", when, tool, wait, msg)
				}
				notStarted(fmt.Sprintf("%s: %s wait_ms=%d", when, tool, wait), state)
			}
		}
		for _, w := range []string{"run", "r", "start", "starti"} {
			as.refused("gdb_break", map[string]any{"location": w}) // no such function
			as.refused("gdb_print", map[string]any{"expression": w})
		}
		for _, w := range []string{"run > x", "start;", "starti|id", "shell id", "!id", "|id"} {
			as.refused("gdb_break", map[string]any{"location": w})
		}
		notStarted(when+": names", state)
	}

	try("before the student runs it", gdbmi.StateNotStarted)

	// The canary works: the student's own run starts the program.
	st.run(gp, "run")
	starts++
	st.waitPane(gp, `exited normally`, 20*time.Second)
	if _, err := os.Lstat(canary); err != nil {
		t.Fatalf("the student's run did not create the canary: %v", err)
	}
	if err := os.Remove(canary); err != nil {
		t.Fatal(err)
	}
	try("after the program exited", gdbmi.StateExited)
	if n := strings.Count(st.capture(gp), "Starting program"); n != 1 {
		t.Fatalf("the program was started %d times, want once (by the student):\n%s", n, lastLines(st.capture(gp), 20))
	}
}

// TestGDBHardwareRegisters: on rp2350 gdb_print of a constant in the
// peripheral or SIO ranges, and a breakpoint at such an address, are
// refused before anything reaches gdb (reading a UART's data register pops
// its FIFO; a breakpoint there is a register write). Other addresses, and
// the same addresses on another profile, still reach gdb. The debugger is
// the host's gdb on a host program: the policy follows the instance's
// profile, not the program.
func TestGDBHardwareRegisters(t *testing.T) {
	testenv.Require(t, "gdb")
	rp := testenv.New(t, testenv.Options{Profile: "rp2350", Series: "demo", Card: "hello", Task: "3"})
	rp.Select(t)
	native := testenv.New(t, testenv.Options{Share: rp})
	for _, in := range []*testenv.Instance{rp, native} {
		src := filepath.Join(in.Resolved.TaskDir, "spin.c")
		if err := os.WriteFile(src, []byte(spinC), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(in.Resolved.TaskDir, "spin"), src).CombinedOutput(); err != nil {
			t.Fatalf("gcc spin.c: %v\n%s", err, out)
		}
	}
	s := connect(t, rp, "assist")
	st := studentOf(t, rp)
	gp := startBridge(t, rp, "./spin")
	st.run(gp, "break main")
	st.run(gp, "run")
	// The prompt after the stop: gdb prints the source line and the prompt
	// after the breakpoint's line, and a capture between them would differ
	// from the later one without anything having happened.
	st.waitPane(gp, `(?s)Breakpoint 1, main.*\(gdb\) `, 15*time.Second)
	paneBefore := st.capture(gp)

	refused := []string{"*(uint32_t *) 0x40070000", "{int} 0x40070000", "*0x40070000@4", "((char *) 0x5fffffff)[0]", "*(int *) 0xd0000000",
		"*(unsigned *) 0xDFFFFFFCul", "*(int *) 1073741824", "*(int *) 010000000000", "x & 0x40000000"}
	for _, e := range refused {
		msg := s.refused("gdb_print", map[string]any{"expression": e})
		if !strings.Contains(msg, "refused on rp2350") || !strings.Contains(msg, "hardware registers") {
			t.Errorf("gdb_print %q on rp2350: %s", e, msg)
		}
	}
	for _, loc := range []string{"*0x40070000", "*0x50000000", "*0xd0000010"} {
		if msg := s.refused("gdb_break", map[string]any{"location": loc}); !strings.Contains(msg, "refused on rp2350") {
			t.Errorf("gdb_break %q on rp2350: %s", loc, msg)
		}
	}
	// Outside the ranges the expression reaches gdb (which cannot read
	// these addresses in a host process).
	for _, e := range []string{"*(int *) 0x3ffffffc", "*(int *) 0x60000000", "*(int *) 0xe000e010", "{int} 0x20000000"} {
		msg := s.refused("gdb_print", map[string]any{"expression": e})
		if strings.Contains(msg, "hardware registers") || !strings.Contains(msg, "Cannot access memory") {
			t.Errorf("gdb_print %q on rp2350: %s", e, msg)
		}
	}
	// Stopped at main, before the loop: spins is 0.
	if pr := s.ok("gdb_print", map[string]any{"expression": "spins + 1"}); strings.TrimSpace(str(pr["value"])) != "1" {
		t.Errorf("gdb_print spins + 1: %v", pr)
	}
	if now := st.capture(gp); now != paneBefore {
		t.Errorf("the student's gdb pane changed:\n%s", lastLines(now, 10))
	}

	// Another profile: the same address goes to gdb.
	native.Select(t)
	waitUntil(t, 10*time.Second, "the server follows to "+native.Name, func() bool {
		out, _, err := s.call("session_status", nil)
		return err == nil && str(out["instance"]) == native.Name
	})
	studentOf(t, native).waitPrompt(studentOf(t, native).pane("shell"))
	startBridge(t, native, "./spin")
	if msg := s.refused("gdb_print", map[string]any{"expression": "*(unsigned *) 0x40070000"}); strings.Contains(msg, "hardware registers") || !strings.Contains(msg, "Cannot access memory") {
		t.Errorf("gdb_print of 0x40070000 on %s: %s", native.Record.Profile, msg)
	}
}

const segvC = `#include <stdio.h>
static int *nowhere;
int poke(int v)
{
    *nowhere = v;
    return v;
}
int main(void)
{
    printf("about to crash\n");
    fflush(stdout);
    return poke(42);
}
`

// TestGDBStopOnSignal: the debugged program crashes under the student's
// gdb; the gdb_stopped notification names the signal and the reason.
func TestGDBStopOnSignal(t *testing.T) {
	testenv.Require(t, "gdb")
	in := fixture(t)
	st := studentOf(t, in)
	src := filepath.Join(in.Resolved.TaskDir, "segv.c")
	if err := os.WriteFile(src, []byte(segvC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(in.Resolved.TaskDir, "segv"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc segv.c: %v\n%s", err, out)
	}
	s := connect(t, in, "observe")
	stops := watchStops(s)
	gp := startBridge(t, in, "./segv")
	waitUntil(t, 10*time.Second, "gdb_status sees the debugger", func() bool {
		return str(get(s.ok("gdb_status", nil), "status", "state")) == "not-started"
	})
	drain(stops)
	st.run(gp, "run")
	n := nextStop(t, stops, "gdb_stopped", 20*time.Second)
	if str(n.ev["signal"]) != "SIGSEGV" || str(get(n.ev, "gdb", "reason")) != "signal-received" ||
		str(get(n.ev, "gdb", "frame", "func")) != "poke" {
		t.Fatalf("gdb_stopped for a crash: %s", mustJSON(n.ev))
	}
	// The student's gdb says the same.
	st.waitPane(gp, `Program received signal SIGSEGV`, 10*time.Second)
	out := s.ok("gdb_status", nil)
	if state, fn, _ := statusOf(t, out); state != "stopped" || fn != "poke" {
		t.Fatalf("gdb_status after the crash: %s", clip(mustJSON(out), 1000))
	}
}

// TestGDBStatusFromSyncFile: with no debugger to talk to, gdb_status says
// so and adds what gdb-sync.json last recorded (last_sync): where the
// program stopped when the bridge died, that gdb exited when the student
// quit it; the file's text is sanitized like the rest of the result, and a
// gdb-sync.json that is a symlink is not read.
func TestGDBStatusFromSyncFile(t *testing.T) {
	testenv.Require(t, "gdb")
	in := fixture(t)
	st := studentOf(t, in)
	makeTask(t, in)
	s := connect(t, in, "observe")
	out := s.ok("gdb_status", nil)
	if str(out["state"]) != "no-debugger" || out["last_sync"] != nil {
		t.Fatalf("gdb_status before any debugger: %v", out)
	}
	stopped := func() string {
		t.Helper()
		gp := startBridge(t, in, "./hello")
		st.run(gp, "break count_words")
		st.run(gp, "run")
		st.waitPane(gp, `Breakpoint 1, count_words`, 20*time.Second)
		waitUntil(t, 10*time.Second, "gdb_status from the debugger", func() bool {
			return str(get(s.ok("gdb_status", nil), "status", "state")) == "stopped"
		})
		// The bridge writes its file in the background, after clients
		// heard of the stop: what the file says is what this test checks
		// once the bridge is gone.
		waitUntil(t, 10*time.Second, "gdb-sync.json saying stopped", func() bool {
			sync, err := gdbmi.ReadSync(in.Dir.Path)
			return err == nil && sync.State == gdbmi.StateStopped
		})
		return gp
	}
	noDebugger := func(what string) map[string]any {
		t.Helper()
		waitUntil(t, 10*time.Second, "gdb_status without a debugger "+what, func() bool {
			// A call in flight when the bridge dies fails ("connection
			// to the debugger closed"); the next one finds it gone.
			o, etext, err := s.call("gdb_status", nil)
			out = o
			return err == nil && etext == "" && str(out["state"]) == "no-debugger"
		})
		if !strings.Contains(str(out["message"]), "not running") {
			t.Fatalf("gdb_status %s: %s", what, mustJSON(out))
		}
		m, _ := out["last_sync"].(map[string]any)
		return m
	}

	// The bridge killed at a breakpoint: its socket is stale, its file
	// still says where the program stopped.
	gp := stopped()
	pid := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", gp, "#{pane_pid}"))
	if out, err := exec.Command("kill", "-KILL", pid).CombinedOutput(); err != nil {
		t.Fatalf("kill the bridge: %v\n%s", err, out)
	}
	last := noDebugger("after the bridge was killed")
	if str(last["state"]) != gdbmi.StateStopped || str(get(last, "frame", "func")) != "count_words" ||
		str(last["reason"]) != "breakpoint-hit" || num(last["seq"]) == 0 || !strings.Contains(str(out["message"]), "stale socket") {
		t.Fatalf("gdb_status after the bridge died: %s", mustJSON(out))
	}
	os.Remove(in.Dir.GDB()) // as the debug layout's next start does

	// The student quits gdb: the bridge's last word.
	gp = stopped()
	st.run(gp, "quit")
	st.waitPane(gp, `Quit anyway\? \(y or n\)`, 10*time.Second)
	st.run(gp, "y")
	waitUntil(t, 15*time.Second, "the bridge records that gdb exited", func() bool {
		sync, err := gdbmi.ReadSync(in.Dir.Path)
		return err == nil && sync.State == gdbmi.StateGDBExited
	})
	if last := noDebugger("after the student quit gdb"); str(last["state"]) != gdbmi.StateGDBExited || num(last["seq"]) <= 1 {
		t.Fatalf("gdb_status after the student quit gdb: %s", mustJSON(out))
	}

	// The file is the student's to write: its text is sanitized.
	evil := gdbmi.SyncState{State: gdbmi.StateStopped, Reason: "breakpoint-hit\x1b]0;title\x07",
		Frame: &gdbmi.Frame{Func: "main\x1b[2J\x1b[31m", File: "a\rb.c", Line: 3}, Seq: 9}
	if err := sockets.WriteJSON(in.Dir.Path, sockets.GDBSync, evil); err != nil {
		t.Fatal(err)
	}
	out = s.ok("gdb_status", nil)
	if str(get(out, "last_sync", "frame", "func")) != "main" || str(get(out, "last_sync", "reason")) != "breakpoint-hit" ||
		strings.ContainsAny(mustJSON(out), "\x1b\x07\r") || num(get(out, "last_sync", "seq")) != 9 {
		t.Fatalf("gdb_status with escapes in gdb-sync.json: %q", mustJSON(out))
	}

	// A symlink in its place is not followed.
	elsewhere := filepath.Join(t.TempDir(), "sync.json")
	if err := os.WriteFile(elsewhere, []byte(`{"state":"stopped","seq":77}`), 0o600); err != nil {
		t.Fatal(err)
	}
	syncPath := filepath.Join(in.Dir.Path, sockets.GDBSync)
	if err := os.Remove(syncPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, syncPath); err != nil {
		t.Fatal(err)
	}
	if out := s.ok("gdb_status", nil); str(out["state"]) != "no-debugger" || out["last_sync"] != nil {
		t.Fatalf("gdb_status with gdb-sync.json a symlink: %s", mustJSON(out))
	}
}
