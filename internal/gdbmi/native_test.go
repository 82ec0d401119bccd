package gdbmi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Line numbers below refer to this program.
const nativeProg = `#include <stdio.h>
volatile int spin = 0;
int add(int a, int b) {
  int s = a + b;
  return s;
}
int main(void) {
  int x = 1;
  int arr[4] = {1, 2, 3, 4};
  x = add(x, 2);
  x = add(x, arr[2]);
  if (spin) puts("spinning"); while (spin) { }
  printf("x=%d\n", x);
  return 3;
}
`

func buildNative(t *testing.T) string {
	t.Helper()
	requireProgram(t, "gcc", "gcc")
	requireProgram(t, "gdb", "gdb")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "prog.c"), []byte(nativeProg), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, work, "gcc", "-g", "-O0", "-o", "prog", "prog.c")
	return work
}

func hexValue(t *testing.T, s string) uint64 {
	t.Helper()
	i := strings.Index(s, "0x")
	if i < 0 {
		t.Fatalf("no hex number in %q", s)
	}
	j := i + 2
	for j < len(s) && isHex(s[j]) {
		j++
	}
	v, err := strconv.ParseUint(s[i+2:j], 16, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// TestNativeSharedSession drives one gdb from the student's terminal and
// two clients at once and checks that all three see the same session.
func TestNativeSharedSession(t *testing.T) {
	work := buildNative(t)
	dir := sockDir(t)
	p := startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	sock := waitSocket(t, dir, p)
	p.waitFor(0, `\(gdb\) $`, 10*time.Second)

	fi, err := os.Lstat(sock)
	// 0660: the group bits are the socket directory's ACL mask (the
	// student's clients need write); the directory keeps others out.
	if err != nil || fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("g.sock mode %v (%v), want a 0660 socket", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("socket dir holds %d entries, want g.sock and gdb-sync.json only", len(ents))
	}
	s0 := waitSync(t, dir, "not-started", func(s SyncState) bool { return s.State == StateNotStarted })
	if s0.GDBPid <= 0 || syscall.Kill(s0.GDBPid, 0) != nil {
		t.Fatalf("gdb_pid %d is not a live process", s0.GDBPid)
	}

	a, b := dial(t, sock), dial(t, sock)
	ctx := context.Background()

	// Observe level: Status before the program runs.
	st, err := b.Status(ctx, true)
	if err != nil || st.State != StateNotStarted {
		t.Fatalf("Status before run = %+v, %v", st, err)
	}

	r := exe(t, a, BreakInsert(mustLoc(t, "main")))
	bk, _ := r.Get("bkpt")
	if bk.Str("number") != "1" || bk.Str("line") != "8" {
		t.Fatalf("break main: %v", Format(Record{Kind: KindResult, Class: r.Class, Results: r.Values}))
	}

	// The student starts the program in the pane; both clients see it stop.
	m := p.mark()
	p.typeText("run\r")
	for i, c := range []*Client{a, b} {
		ev := waitEvent(t, c, EventStopped, 15*time.Second)
		checkStop(t, "client "+strconv.Itoa(i), ev, "breakpoint-hit", "main", 8)
		if ev.Breakpoint != 1 || ev.ThreadID == "" {
			t.Fatalf("stop event: bkpt %d thread %q", ev.Breakpoint, ev.ThreadID)
		}
	}
	p.waitFor(m, `Breakpoint 1, main \(\) at prog.c:8\n8\s+int x = 1;`, 5*time.Second)
	waitSync(t, dir, "stopped at main:8", func(s SyncState) bool {
		return s.State == StateStopped && s.Reason == "breakpoint-hit" && s.Breakpoint == 1 &&
			s.Frame != nil && s.Frame.Func == "main" && s.Frame.Line == 8 && s.Frame.Fullname == filepath.Join(work, "prog.c") &&
			s.ThreadID == "1" && s.Frame.Addr != "" && s.GDBPid == s0.GDBPid && s.Seq > s0.Seq
	})

	// A client steps; the other client and the student's pane follow.
	m = p.mark()
	t0 := time.Now()
	if r := exe(t, a, ExecNext()); r.Class != "running" {
		t.Fatalf("-exec-next answered %q", r.Class)
	}
	evA := waitEvent(t, a, EventStopped, 5*time.Second)
	evB := waitEvent(t, b, EventStopped, 5*time.Second)
	checkStop(t, "a", evA, "end-stepping-range", "main", 9)
	checkStop(t, "b", evB, "end-stepping-range", "main", 9)
	t.Logf("client -exec-next -> stopped event: %v (client a), %v (client b)", evA.Received.Sub(t0), evB.Received.Sub(t0))
	p.waitFor(m, `9\s+int arr\[4\]`, 5*time.Second)
	waitSync(t, dir, "line 9", func(s SyncState) bool { return s.Frame != nil && s.Frame.Line == 9 })

	exe(t, a, ExecNext())
	checkStop(t, "next", waitEvent(t, a, EventStopped, 5*time.Second), "end-stepping-range", "main", 10)
	exe(t, a, ExecStep())
	checkStop(t, "step", waitEvent(t, a, EventStopped, 5*time.Second), "end-stepping-range", "add", 4)
	drainEvents(b)

	// Stack, frame selection and printing from the second client.
	r = exe(t, b, StackListFrames(10))
	stack, _ := r.Get("stack")
	if fr := stack.Elems(); len(fr) != 2 || fr[0].Str("func") != "add" || fr[1].Str("func") != "main" || fr[1].Str("line") != "10" {
		t.Fatalf("backtrace: %v", stack)
	}
	m = p.mark()
	exe(t, b, StackSelectFrame(1))
	// The selection is shared: the student's pane and gdb-sync.json move too.
	p.waitFor(m, `#1 .*main \(\) at prog.c:10`, 5*time.Second)
	waitSync(t, dir, "frame 1 selected", func(s SyncState) bool { return s.Frame != nil && s.Frame.Level == 1 && s.Frame.Func == "main" })
	for expr, want := range map[string]string{"x": "1", "arr[1] + x * 2": "4", "sizeof(arr) / sizeof(arr[0])": "4", "arr[2]@2": "{3, 4}"} {
		if r := exe(t, b, DataEvaluate(mustExpr(t, expr))); r.Console != want {
			t.Errorf("print %s = %q, want %q", expr, r.Console, want)
		}
	}
	exe(t, b, StackSelectFrame(0))
	if r := exe(t, b, DataEvaluate(mustExpr(t, "a + b"))); r.Console != "3" {
		t.Errorf("a + b = %q", r.Console)
	}
	r = exe(t, b, StackListVariables())
	vars, _ := r.Get("variables")
	var names []string
	for _, v := range vars.Elems() {
		names = append(names, v.Str("name"))
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "a,b,s" {
		t.Errorf("variables in add: %v", names)
	}
	if _, err := b.Exec(ctx, DataEvaluate(mustExpr(t, "nosuchvar"))); err == nil || !strings.Contains(err.Error(), "nosuchvar") {
		t.Errorf("print of an unknown name: %v", err)
	}

	exe(t, a, ExecFinish())
	ev := waitEvent(t, a, EventStopped, 5*time.Second)
	checkStop(t, "finish", ev, "function-finished", "main", 10)
	if rv := ev.Record.Str("return-value"); rv != "3" {
		t.Errorf("finish return-value %q", rv)
	}

	// Registers by number and by expression agree.
	r = exe(t, b, RegisterNames())
	rn, _ := r.Get("register-names")
	rip := -1
	for i, n := range rn.Elems() {
		if n.Const == "rip" {
			rip = i
		}
	}
	if rip < 0 {
		t.Fatalf("no rip in %v", rn)
	}
	r = exe(t, b, RegisterValues(FormatHex, rip))
	rv, _ := r.Get("register-values")
	pcReg := hexValue(t, rv.Elems()[0].Str("value"))
	pcExpr := hexValue(t, exe(t, b, DataEvaluate(mustExpr(t, "$pc"))).Console)
	if pcReg != pcExpr || pcReg != hexValue(t, ev.Frame.Addr) {
		t.Errorf("pc: register %#x, $pc %#x, stop frame %s", pcReg, pcExpr, ev.Frame.Addr)
	}

	st, err = a.Status(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateStopped || st.Frame == nil || st.Frame.Func != "main" || len(st.Backtrace) != 1 || st.Reason != "function-finished" {
		t.Fatalf("Status: %+v", st)
	}
	regs := map[string]string{}
	for _, r := range st.Registers {
		regs[r.Name] = r.Hex
	}
	if regs["rip"] == "" || regs["rsp"] == "" || hexValue(t, regs["rip"]) != pcReg || len(regs) > 64 {
		t.Errorf("Status registers: %v", st.Registers)
	}
	drainEvents(a)
	drainEvents(b)

	// The student types next: the clients see it as events.
	m = p.mark()
	t1 := time.Now()
	p.typeText("next\r")
	evA = waitEvent(t, a, EventStopped, 5*time.Second)
	evB = waitEvent(t, b, EventStopped, 5*time.Second)
	seen := p.waitFor(m, `11\s+x = add\(x, arr\[2\]\);`, 5*time.Second)
	checkStop(t, "a", evA, "end-stepping-range", "main", 11)
	checkStop(t, "b", evB, "end-stepping-range", "main", 11)
	t.Logf("student types next -> stopped event: %v (a), %v (b); pane showed the line after %v (polled)", evA.Received.Sub(t1), evB.Received.Sub(t1), seen.Sub(t1))

	// A client resumes, the other interrupts.
	exe(t, a, Console("set var spin = 1"))
	m = p.mark()
	exe(t, a, ExecContinue())
	waitEvent(t, b, EventRunning, 5*time.Second)
	waitSync(t, dir, "running", func(s SyncState) bool { return s.State == StateRunning && s.Frame == nil })
	p.waitFor(m, `spinning`, 5*time.Second) // in the loop of line 12
	if r := exe(t, b, ThreadInfo()); !strings.Contains(Format(Record{Kind: KindResult, Class: "done", Results: r.Values}), `state="running"`) {
		t.Errorf("thread-info while running: %v", r.Values)
	}
	if st, err := a.Status(ctx, true); err != nil || st.State != StateRunning {
		t.Errorf("Status while running: %+v %v", st, err)
	}
	exe(t, b, ExecInterrupt())
	for _, c := range []*Client{a, b} {
		ev := waitEvent(t, c, EventStopped, 5*time.Second)
		if ev.Reason != "signal-received" || ev.Signal != "SIGINT" || ev.Frame.Line != 12 {
			t.Fatalf("interrupt: %+v frame %+v", ev, ev.Frame)
		}
	}
	waitSync(t, dir, "SIGINT stop", func(s SyncState) bool { return s.State == StateStopped && s.Signal == "SIGINT" })

	// Ctrl-C in the pane while a client had resumed the program: gdb keeps
	// the terminal and would only print "Quit", so the bridge interrupts.
	// (The program resumes in the loop it was stopped in.)
	exe(t, a, ExecContinue())
	waitEvent(t, a, EventRunning, 5*time.Second)
	// A Ctrl-C that reaches gdb while it is still resuming aborts the
	// resume (gdb announces no stop then; the bridge does): either way
	// the clients see the program stop in the loop.
	p.typeText("\x03")
	if ev := waitEvent(t, a, EventStopped, 5*time.Second); (ev.Signal != "SIGINT" && ev.Reason != "") || ev.Frame == nil || ev.Frame.Line != 12 {
		t.Fatalf("Ctrl-C after a client continue: %+v", ev)
	} else if ev.Reason == "" {
		t.Logf("the Ctrl-C aborted the resume: %+v", ev)
	}
	// Ctrl-C after the student's own continue goes to gdb as usual, and the
	// bridge survives it.
	m = p.mark()
	p.typeText("continue\r")
	waitEvent(t, a, EventRunning, 5*time.Second)
	p.waitFor(m, `Continuing\.`, 5*time.Second)
	p.typeText("\x03")
	if ev := waitEvent(t, a, EventStopped, 5*time.Second); ev.Signal != "SIGINT" {
		t.Fatalf("Ctrl-C after the student's continue: %+v", ev)
	}
	p.waitFor(m, `Program received signal SIGINT`, 5*time.Second)

	exe(t, a, Console("set var spin = 0"))
	if r := exe(t, a, Console("info line")); !strings.Contains(r.Console, "Line 12 of \"prog.c\"") {
		t.Errorf("info line: %q", r.Console)
	}
	if r, err := a.Exec(ctx, Console("frobnicate")); err == nil || !strings.Contains(err.Error(), "Undefined command") {
		t.Errorf("unknown console command: %+v %v", r, err)
	}

	// Run to the end.
	m = p.mark()
	exe(t, b, ExecContinue())
	for _, c := range []*Client{a, b} {
		ev := waitEvent(t, c, EventExited, 5*time.Second)
		if ev.ExitCode == nil || *ev.ExitCode != 3 || ev.Reason != "exited" {
			t.Fatalf("exit event: %+v", ev)
		}
	}
	p.waitFor(m, `x=6\n(.|\n)*exited with code 03`, 5*time.Second)
	waitSync(t, dir, "exited 3", func(s SyncState) bool { return s.State == StateExited && s.ExitCode != nil && *s.ExitCode == 3 })
	if st, err := b.Status(ctx, false); err != nil || st.State != StateExited || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Errorf("Status after exit: %+v %v", st, err)
	}

	// The student quits gdb: the bridge exits with gdb's code and cleans up.
	p.typeText("quit 7\r")
	if code := p.waitExit(10 * time.Second); code != 7 {
		t.Fatalf("bridge exit code %d, want gdb's 7", code)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("g.sock still there after exit: %v", err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Error("client connection still open after the bridge exited")
	}
	if _, err := a.Exec(ctx, BreakList()); err == nil {
		t.Error("Exec after the bridge exited succeeded")
	}
	waitSync(t, dir, "gdb-exited", func(s SyncState) bool { return s.State == StateGDBExited && s.GDBPid == 0 })
	if _, err := Dial(ctx, sock); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Dial after exit: %v", err)
	}
}

const loopProg = `volatile int sink;
int main(void) {
  for (int i = 0; i < 1000000; i++) {
    sink += i;
  }
  return 0;
}
`

// BenchmarkStopEventLatency measures how long a stop takes to reach
// clients: from a client's -exec-next, and from the student typing next
// (the product's target is 50 ms end to end). Each iteration is one of
// each; the medians are reported.
func BenchmarkStopEventLatency(b *testing.B) {
	requireProgram(b, "gcc", "gcc")
	requireProgram(b, "gdb", "gdb")
	work := b.TempDir()
	if err := os.WriteFile(filepath.Join(work, "loop.c"), []byte(loopProg), 0o600); err != nil {
		b.Fatal(err)
	}
	run(b, work, "gcc", "-g", "-O0", "-o", "loop", "loop.c")
	dir := sockDir(b)
	p := startPane(b, dir, work, "gdb", "-q", "-nx", "loop")
	sock := waitSocket(b, dir, p)
	ca, cb := dial(b, sock), dial(b, sock)
	exe(b, ca, BreakInsert(mustLoc(b, "main")))
	p.waitFor(0, `\(gdb\) $`, 10*time.Second)
	p.typeText("run\r")
	waitEvent(b, ca, EventStopped, 15*time.Second)
	waitEvent(b, cb, EventStopped, 15*time.Second)

	var viaClient, viaPane, paneToEvent []time.Duration
	for b.Loop() {
		t0 := time.Now()
		exe(b, ca, ExecNext())
		waitEvent(b, ca, EventStopped, 5*time.Second)
		ev := waitEvent(b, cb, EventStopped, 5*time.Second)
		if !ev.Received.After(t0) {
			b.Fatal("stale stop event")
		}
		viaClient = append(viaClient, ev.Received.Sub(t0))

		m := p.mark()
		t0 = time.Now()
		p.typeText("next\r")
		ev = waitEvent(b, cb, EventStopped, 5*time.Second)
		waitEvent(b, ca, EventStopped, 5*time.Second)
		seen := p.waitFor(m, `\(gdb\) $`, 5*time.Second)
		if !ev.Received.After(t0) {
			b.Fatal("stale stop event")
		}
		viaPane = append(viaPane, ev.Received.Sub(t0))
		paneToEvent = append(paneToEvent, ev.Received.Sub(seen))
	}
	med := func(d []time.Duration) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(viaClient), "client-p50-ms")
	b.ReportMetric(med(viaPane), "typed-p50-ms")
	// Negative: the client heard of the stop before the pane showed it.
	b.ReportMetric(med(paneToEvent), "after-prompt-p50-ms")
}

// A resume gdb aborts after answering ^running (here: a breakpoint at an
// address it cannot write) leaves the program stopped; gdb tells no MI UI,
// so the bridge does, and says so in the pane.
func TestNativeAbortedResume(t *testing.T) {
	work := buildNative(t)
	dir := sockDir(t)
	p := startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	sock := waitSocket(t, dir, p)
	p.waitFor(0, `\(gdb\) $`, 10*time.Second)
	a, b := dial(t, sock), dial(t, sock)

	exe(t, a, BreakInsert(mustLoc(t, "main")))
	p.typeText("run\r")
	for _, c := range []*Client{a, b} {
		checkStop(t, "run", waitEvent(t, c, EventStopped, 15*time.Second), "breakpoint-hit", "main", 8)
	}
	m := p.mark()
	p.typeText("break *0\r")
	p.waitFor(m, `Breakpoint 2 at 0x0\n\(gdb\) $`, 5*time.Second)
	drainEvents(a)
	drainEvents(b)

	m = p.mark()
	if r := exe(t, a, ExecContinue()); r.Class != "running" {
		t.Fatalf("continue answered %q, want running (gdb answers before it inserts breakpoints)", r.Class)
	}
	for _, c := range []*Client{a, b} {
		ev := waitEvent(t, c, EventStopped, 5*time.Second)
		if ev.Reason != "" || ev.Frame == nil || ev.Frame.Func != "main" || ev.Frame.Line != 8 || ev.ThreadID != "1" {
			t.Fatalf("stop after the aborted resume: %+v frame %+v", ev, ev.Frame)
		}
	}
	waitSync(t, dir, "stopped at main:8 again", func(s SyncState) bool {
		return s.State == StateStopped && s.Frame != nil && s.Frame.Line == 8
	})
	p.waitFor(m, `\[agent resumed the program, but gdb stopped it before it ran: Command aborted\.\]`, 5*time.Second)
	// The session goes on: without the bad breakpoint the program runs.
	p.typeText("delete 2\r")
	exe(t, a, Console("set var spin = 0"))
	exe(t, b, ExecContinue())
	if ev := waitEvent(t, a, EventExited, 5*time.Second); ev.ExitCode == nil || *ev.ExitCode != 3 {
		t.Fatalf("exit after the aborted resume: %+v", ev)
	}
}
