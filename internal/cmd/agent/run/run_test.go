package run_test

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/agent/run"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// The hidden supervisor command: --dir is required and takes no
// arguments; a directory without the agent's spec fails before anything
// starts, and the failure reaches `agent start` as an error line on the
// readiness descriptor, which is closed after it.
func TestRunNeedsTheAgentsDirectory(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	cmd := run.NewCmdRun(w.F)
	if !cmd.Hidden {
		t.Error("agent run is listed in help")
	}
	if err := w.Run(run.NewCmdRun(w.F)); err == nil || !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "--dir is required") {
		t.Fatalf("no --dir: %v", err)
	}
	if err := w.Run(run.NewCmdRun(w.F), "--dir", t.TempDir(), "extra"); err == nil {
		t.Fatal("an argument was accepted")
	}

	dir := t.TempDir()
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Run takes the descriptor over and closes it: give it a copy.
	fd, err := syscall.Dup(int(wr.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	wr.Close()
	err = w.Run(run.NewCmdRun(w.F), "--dir", dir, "--ready-fd", strconv.Itoa(fd))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "spec.json")) {
		t.Fatalf("a directory without spec.json: %v", err)
	}
	// ReadAll returns only once the write end is closed: a descriptor
	// left open would hang `agent start`.
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	line := string(data)
	if !strings.HasPrefix(line, "error ") || !strings.Contains(line, "spec.json") {
		t.Fatalf("readiness line %q", line)
	}
	if log := w.ErrOut.String(); !strings.HasPrefix(log, "stemctl agent run: ") || !strings.Contains(log, "error: open ") {
		t.Fatalf("the supervisor's log: %q", w.ErrOut)
	}
}
