package procstat

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	self, err := Start(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("Start(self) = %d, %v", self, err)
	}
	if !Same(os.Getpid(), self) || Same(os.Getpid(), self+1) {
		t.Fatal("Same does not tell this process from another start time")
	}
}

// TestHelperBlock is the child of TestStopped: it waits for its input to end.
func TestHelperBlock(t *testing.T) {
	if os.Getenv("PROCSTAT_HELPER") != "1" {
		t.Skip("the child of TestStopped")
	}
	io.Copy(io.Discard, os.Stdin)
}

func TestStopped(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBlock$")
	cmd.Env = append(os.Environ(), "PROCSTAT_HELPER=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	if Stopped(pid) {
		t.Fatal("a running process is reported stopped")
	}
	// A signal takes effect a moment after it is sent.
	until := func(want bool) {
		for deadline := time.Now().Add(10 * time.Second); Stopped(pid) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Stopped(%d) is not %v after 10 s", pid, want)
			}
		}
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	until(true)
	syscall.Kill(pid, syscall.SIGCONT)
	until(false)
	if Stopped(-1) {
		t.Fatal("no process is reported stopped")
	}
}
