package gdbmi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const rvLinkerScript = `ENTRY(_start)
MEMORY { RAM (rwx) : ORIGIN = 0x80000000, LENGTH = 1M }
SECTIONS {
  .text : { *(.text.start) *(.text*) } > RAM
  .rodata : { *(.rodata*) } > RAM
  .data : { *(.data*) *(.sdata*) } > RAM
  .bss : { *(.bss*) *(.sbss*) *(COMMON) } > RAM
  . = ALIGN(16);
  . = . + 0x4000;
  _stack_top = .;
}
`

const rvStart = `  .section .text.start
  .globl _start
_start:
  la sp, _stack_top
  call main
1:
  j 1b
`

// Line numbers below refer to this program.
const rvProg = `int square(int v) {
  int r = v * v;
  return r;
}
int main(void) {
  int a = 3;
  int b = square(a);
  return a + b;
}
`

// isInt reports whether s is a decimal integer, as gdb prints an int.
func isInt(s string) bool { return regexp.MustCompile(`^-?[0-9]+$`).MatchString(s) }

// freePort asks the kernel for a free loopback port. Another process could
// take it before QEMU binds it; the test then fails to connect and says so.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening polls /proc/net/tcp for a loopback listener on port without
// connecting: QEMU's gdb stub serves a single connection.
func waitListening(t *testing.T, port int, done <-chan struct{}) {
	t.Helper()
	want := fmt.Sprintf("0100007F:%04X", port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 && fs[1] == want && fs[3] == "0A" {
				f.Close()
				return
			}
		}
		f.Close()
		select {
		case <-done:
			t.Fatalf("qemu exited before listening on port %d", port)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("qemu is not listening on 127.0.0.1:%d", port)
}

func TestRISCVQemu(t *testing.T) {
	requireProgram(t, "riscv64-unknown-elf-gcc", "gcc-riscv64-unknown-elf")
	requireProgram(t, "qemu-system-riscv32", "qemu-system-misc")
	requireProgram(t, "gdb-multiarch", "gdb-multiarch")
	work := t.TempDir()
	for name, body := range map[string]string{"link.ld": rvLinkerScript, "start.S": rvStart, "prog.c": rvProg} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run(t, work, "riscv64-unknown-elf-gcc", "-march=rv32im", "-mabi=ilp32", "-g", "-O0", "-nostdlib",
		"-T", "link.ld", "-o", "prog.elf", "start.S", "prog.c")

	port := freePort(t)
	qctx, qcancel := context.WithCancel(context.Background())
	qemu := exec.CommandContext(qctx, "qemu-system-riscv32", "-M", "virt", "-cpu", "rv32", "-nographic",
		"-bios", "none", "-kernel", "prog.elf", "-S", "-gdb", fmt.Sprintf("tcp:127.0.0.1:%d", port))
	qemu.Dir = work
	var qout strings.Builder
	qemu.Stdout, qemu.Stderr = &qout, &qout
	if err := qemu.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	qdone := make(chan struct{})
	go func() { qemu.Wait(); close(qdone) }()
	t.Cleanup(func() {
		qcancel()
		<-qdone
		if t.Failed() {
			t.Logf("qemu output:\n%s", qout.String())
		}
	})
	waitListening(t, port, qdone)

	dir := sockDir(t)
	p := startPane(t, dir, work, "gdb-multiarch", "-q", "-nx", "prog.elf", "-ex", fmt.Sprintf("target remote 127.0.0.1:%d", port))
	sock := waitSocket(t, dir, p)
	p.waitFor(0, `Remote debugging using 127.0.0.1`, 10*time.Second)
	// The stop at attach happened before any client connected; the mirror
	// file has it.
	waitSync(t, dir, "stopped after target remote", func(s SyncState) bool {
		return s.State == StateStopped && s.Frame != nil && s.Frame.Addr == "0x00001000"
	})
	a, b := dial(t, sock), dial(t, sock)
	ctx := context.Background()

	r := exe(t, a, BreakInsert(mustLoc(t, "main")))
	if bk, _ := r.Get("bkpt"); bk.Str("line") != "6" {
		t.Fatalf("break main: %v", r.Values)
	}
	if r := exe(t, a, BreakInsert(mustLoc(t, "prog.c:8"))); len(r.Values) == 0 {
		t.Fatal("break prog.c:8")
	}
	m := p.mark()
	exe(t, a, ExecContinue())
	for _, c := range []*Client{a, b} {
		ev := waitEvent(t, c, EventStopped, 10*time.Second)
		checkStop(t, "continue", ev, "breakpoint-hit", "main", 6)
	}
	// A breakpoint hit is printed in the student's pane by gdb itself.
	p.waitFor(m, `Breakpoint 1, main \(\) at prog.c:6\n6\s+int a = 3;`, 5*time.Second)

	// Registers by name and number.
	r = exe(t, b, RegisterNames())
	rn, _ := r.Get("register-names")
	idx := map[string]int{}
	for i, n := range rn.Elems() {
		if n.Const != "" {
			idx[n.Const] = i
		}
	}
	for _, n := range []string{"pc", "sp", "a0", "ra", "t0"} {
		if _, ok := idx[n]; !ok {
			t.Fatalf("no register %s in %v", n, rn)
		}
	}
	r = exe(t, b, RegisterValues(FormatHex, idx["pc"], idx["sp"]))
	rv, _ := r.Get("register-values")
	vals := rv.Elems()
	if len(vals) != 2 {
		t.Fatalf("register values: %v", rv)
	}
	pc := hexValue(t, vals[0].Str("value"))
	if pc < 0x80000000 || pc > 0x80100000 {
		t.Errorf("pc %#x outside RAM", pc)
	}
	for expr, check := range map[string]func(string) bool{
		"$pc":           func(s string) bool { return hexValue(t, s) == pc },
		"$sp":           func(s string) bool { return hexValue(t, s) == hexValue(t, vals[1].Str("value")) },
		"$a0 == $x10":   func(s string) bool { return s == "1" },
		"$t0 == $x5":    func(s string) bool { return s == "1" },
		"*(int *) $sp":  func(s string) bool { return isInt(s) },
		"{int} $sp":     func(s string) bool { return isInt(s) },
		"sizeof(void*)": func(s string) bool { return s == "4" },
	} {
		r := exe(t, b, DataEvaluate(mustExpr(t, expr)))
		if !check(r.Console) {
			t.Errorf("print %s = %q", expr, r.Console)
		}
	}

	// Both spellings read the same word at the stack pointer.
	if x, y := exe(t, b, DataEvaluate(mustExpr(t, "*(int *) $sp"))).Console, exe(t, b, DataEvaluate(mustExpr(t, "{int} $sp"))).Console; x != y {
		t.Errorf("*(int *) $sp = %q but {int} $sp = %q", x, y)
	}

	// Step into square and look at the stack.
	exe(t, a, ExecNext())
	checkStop(t, "next", waitEvent(t, a, EventStopped, 5*time.Second), "end-stepping-range", "main", 7)
	exe(t, a, ExecStep())
	checkStop(t, "step", waitEvent(t, a, EventStopped, 5*time.Second), "end-stepping-range", "square", 2)
	if r := exe(t, b, DataEvaluate(mustExpr(t, "v * 2"))); r.Console != "6" {
		t.Errorf("v * 2 = %q", r.Console)
	}
	r = exe(t, b, StackListFrames(10))
	stack, _ := r.Get("stack")
	fr := stack.Elems()
	if len(fr) < 2 || fr[0].Str("func") != "square" || fr[1].Str("func") != "main" || fr[1].Str("line") != "7" {
		t.Fatalf("backtrace: %v", stack)
	}
	st, err := b.Status(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	regs := map[string]string{}
	for _, r := range st.Registers {
		regs[r.Name] = r.Hex
	}
	if st.State != StateStopped || st.Frame == nil || st.Frame.Func != "square" || len(st.Backtrace) < 2 ||
		regs["pc"] == "" || regs["a0"] == "" || regs["sp"] == "" || len(regs) != 33 {
		t.Fatalf("Status: %+v registers %v", st, regs)
	}
	if hexValue(t, regs["a0"]) != 3 {
		t.Errorf("a0 in square = %s, want the argument 3", regs["a0"])
	}
	waitSync(t, dir, "stopped in square", func(s SyncState) bool {
		return s.State == StateStopped && s.Frame != nil && s.Frame.Func == "square" && s.Frame.Line == 2
	})

	exe(t, a, ExecFinish())
	ev := waitEvent(t, a, EventStopped, 5*time.Second)
	checkStop(t, "finish", ev, "function-finished", "main", 7)
	if ev.Record.Str("return-value") != "9" {
		t.Errorf("square returned %q", ev.Record.Str("return-value"))
	}
	exe(t, a, ExecContinue())
	checkStop(t, "continue", waitEvent(t, a, EventStopped, 5*time.Second), "breakpoint-hit", "main", 8)
	if r := exe(t, b, DataEvaluate(mustExpr(t, "a + b"))); r.Console != "12" {
		t.Errorf("a + b = %q", r.Console)
	}

	// The student types in the pane too.
	m = p.mark()
	p.typeText("info registers a0\r")
	p.waitFor(m, `a0\s+0x`, 5*time.Second)
	p.typeText("kill\r")
	p.waitFor(m, `Kill the program being debugged\? \(y or n\)`, 5*time.Second)
	p.typeText("y\r")
	waitSync(t, dir, "exited after kill", func(s SyncState) bool { return s.State == StateExited })
	p.typeText("quit\r")
	if code := p.waitExit(10 * time.Second); code != 0 {
		t.Errorf("bridge exit code %d", code)
	}
}
