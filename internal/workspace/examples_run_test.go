//go:build linux

package workspace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv/demotask"
)

// These tests run the example cards with this host's toolchains, which are
// the Debian 12 packages the container images carry. They are skipped only
// with -short: a broken example must fail CI, and a missing toolchain is an
// error, not a reason to skip.

// commandTimeout bounds one build, test or run command.
const commandTimeout = 3 * time.Minute

// profileTools are the programs the example commands of each profile need.
var profileTools = map[string][]string{
	"native-amd64": {"make", "gcc", "gdb"},
	"hazard3-sim":  {"make", "riscv64-unknown-elf-gcc", "qemu-system-riscv32", "gdb-multiarch", "timeout"},
	"rp2350":       {"make", "riscv64-unknown-elf-gcc", "arm-none-eabi-gcc", "od"},
}

func needTools(t *testing.T, profile string) {
	t.Helper()
	for _, tool := range profileTools[profile] {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s examples need %s: install the %s toolchain (see containers/Containerfile) or run go test -short", profile, tool, profile)
		}
	}
}

// copyExamples copies examples/workspace into a temporary workspace, as make
// demo does, so builds never write into the source tree.
func copyExamples(t *testing.T) *Workspace {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(examplesRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(examplesRoot, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// commandEnv is the environment of example commands: no device, and no
// make flags inherited from a make that runs go test.
func commandEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "STEM_DEVICE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// shell prepares sh -c command in dir, in its own process group so a
// timeout kills make, QEMU and everything else it started.
func shell(ctx context.Context, dir, command string, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runCommand runs command in dir with a timeout and returns its combined
// output and error.
func runCommand(t *testing.T, dir, command string, env []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := shell(ctx, dir, command, env)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	t.Logf("%s: %s in %v", filepath.Base(dir), command, time.Since(start).Round(time.Millisecond))
	return string(out), err
}

func TestExamplesBuildAndTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make for every example task; -short skips it")
	}
	ws := copyExamples(t)
	env := commandEnv()
	for _, run := range exampleRuns(t, ws) {
		r := run.r
		t.Run(run.name, func(t *testing.T) {
			needTools(t, r.Profile.Name)
			steps := []struct{ what, cmd string }{
				{"build", r.Commands.Build},
				{"test", r.Commands.Test},
			}
			if r.Profile.Name != "rp2350" { // running needs the board
				steps = append(steps, struct{ what, cmd string }{"run", r.Commands.Run})
			}
			if r.Series == "demo" && r.Card == "hello" && r.TaskID == "1" {
				// The first exercise: its tests fail until the student fixes
				// the bug, then pass (the steps below).
				if out, err := runCommand(t, r.TaskDir, r.Commands.Build, env); err != nil {
					t.Fatalf("build: %v\n%s", err, out)
				}
				out, err := runCommand(t, r.TaskDir, r.Commands.Test, env)
				if err == nil || !strings.Contains(out, demotask.FailingCheck) || !strings.Contains(out, demotask.Failed) {
					t.Fatalf("the demo task's tests before the fix: %v, want them failing\n%s", err, out)
				}
				if err := demotask.Fix(r.TaskDir); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range steps {
				out, err := runCommand(t, r.TaskDir, s.cmd, env)
				if err != nil {
					t.Fatalf("%s: %s: %v\n%s", s.what, s.cmd, err, out)
				}
			}
			if r.Profile.Name == "rp2350" {
				// Without a device, deploy must fail and say how to pass one.
				out, err := runCommand(t, r.TaskDir, r.Commands.Deploy, env)
				if err == nil {
					t.Fatalf("deploy without STEM_DEVICE succeeded:\n%s", out)
				}
				for _, want := range []string{"STEM_DEVICE", "--device", "/dev/bus/usb/", "/dev/ttyACM0"} {
					if !strings.Contains(out, want) {
						t.Errorf("deploy message lacks %q:\n%s", want, out)
					}
				}
			}
		})
	}
}

// A broken RV32 program must fail make test, and a trap must end QEMU
// instead of hanging it.
func TestExamplesFailLoudly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs QEMU; -short skips it")
	}
	needTools(t, "hazard3-sim")
	ws := copyExamples(t)
	env := commandEnv()

	dir := filepath.Join(ws.Root, "inf", "bss", "t2")
	// Without the loop that zeroes .bss, the poisoned RAM shows.
	start := filepath.Join(dir, "start.S")
	src, err := os.ReadFile(start)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(src), "    sw      zero, 0(t0)", "    nop", 1)
	if broken == string(src) {
		t.Fatal("start.S no longer has the store this test removes")
	}
	if err := os.WriteFile(start, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCommand(t, dir, "make test", env)
	if err == nil || !strings.Contains(out, "NOT zero") {
		t.Errorf("make test passed without zeroing .bss: %v\n%s", err, out)
	}

	// A store to an unmapped address traps, reports and exits with 99.
	dir = filepath.Join(ws.Root, "demo", "hello", "t2")
	main := filepath.Join(dir, "main.c")
	src, err = os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	broken = strings.Replace(string(src), "int sum = sum_array", "*(volatile int *)0x4 = 1;\n    int sum = sum_array", 1)
	if err := os.WriteFile(main, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCommand(t, dir, "make && make run", env)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "trap: mcause=0x00000007") {
		t.Errorf("trap: err = %v\n%s", err, out)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// example commands use 1234; tests on a shared host must not.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestExamplesDebug runs each task's debug layout for real: debug_program
// in the background (QEMU halted with its gdb stub for hazard3-sim), then
// the debug command with gdb batch commands: break main, continue (or
// run), step, info registers, bt (from a breakpoint in a callee).
func TestExamplesDebug(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gdb and QEMU for every example task; -short skips it")
	}
	ws := copyExamples(t)
	env := commandEnv()
	for _, run := range exampleRuns(t, ws) {
		r := run.r
		if r.Profile.Name == "rp2350" {
			continue // needs a board and an RP2350-capable OpenOCD
		}
		t.Run(run.name, func(t *testing.T) {
			needTools(t, r.Profile.Name)
			if out, err := runCommand(t, r.TaskDir, r.Commands.Build, env); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			debug := r.Commands.Debug
			var batch []string
			var want []string
			switch r.Profile.Name {
			case "hazard3-sim":
				port := freePort(t)
				const stub = "127.0.0.1:1234"
				if !strings.Contains(r.Commands.DebugProgram, stub) || !strings.Contains(debug, stub) {
					t.Fatalf("debug commands do not use %s:\n%s\n%s", stub, r.Commands.DebugProgram, debug)
				}
				debug = strings.ReplaceAll(debug, stub, "127.0.0.1:"+port)
				startProgram(t, r.TaskDir, strings.ReplaceAll(r.Commands.DebugProgram, stub, "127.0.0.1:"+port), env)
				// Every example prints through uart_putc (sim.c): a
				// breakpoint there gives a backtrace of a few frames.
				batch = []string{"break main", "continue", "step", "info registers pc sp ra a0", "break uart_putc", "continue", "bt", "info symbol main"}
				want = []string{"Breakpoint 1, main ()", "pc             0x8", "sp             0x8", "Breakpoint 2, uart_putc (", "#0  uart_putc (", "#1  0x", " in main ()", "main in section .text"}
			case "native-amd64":
				// The demo task's layout debugs its failing unit tests: the
				// stop in the function under test, called by a check.
				batch = []string{"break count_words", "run", "step", "info registers rip rsp", "bt"}
				want = []string{"Breakpoint 1, count_words (", "rip            0x", "#0  count_words (", " in check (", " in main ("}
			}
			for _, c := range batch {
				debug += " -ex '" + c + "'"
			}
			// gdb parses options after the file name too; -batch quits at the end.
			out, err := runCommand(t, r.TaskDir, debug+" -batch", env)
			if err != nil {
				t.Fatalf("%s: %v\n%s", debug, err, out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("gdb output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// startProgram starts the debug layout's program pane command in the
// background and stops its whole process group when the test ends.
func startProgram(t *testing.T, dir, command string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	cmd := shell(ctx, dir, command, env)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cancel()
		_ = cmd.Wait()
		t.Logf("program pane: %s\n%s", command, out.String())
	})
}
