//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/containers/podman/v5/libpod/define"
	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// A session the service never recorded as started (it was killed between
// streaming the first output and saving the session) reads as not running
// with exit code 0 on the service started again: that is no exit.
func TestExecStateOfASessionNeverRecordedAsStarted(t *testing.T) {
	for _, c := range []struct {
		name string
		s    *define.InspectExecSession
		want string
	}{
		{"unknown", nil, "may still be running"},
		{"created", &define.InspectExecSession{}, "may still be running"},
		{"running", &define.InspectExecSession{Running: true, Pid: 42}, "still runs"},
		{"stopped", &define.InspectExecSession{CanRemove: true, ExitCode: 3}, "has ended with exit code 3"},
	} {
		if got := execState(c.s); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The command sizedFirst builds, run on a terminal of no size (as the
// exec's is until conmon gets to the start request's size): the program
// sees the size at once, and its arguments arrive as given.
func TestSizedFirst(t *testing.T) {
	needs.Program(t, "stty", "coreutils")
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"stty", "size"}, "30 100"},
		{[]string{"printf", "%s|", "a b", `'c"`, "$HOME", ""}, `a b|'c"|$HOME||`},
	} {
		if got := onBareTerminal(t, sizedFirst(engine.TermSize{Rows: 30, Cols: 100}, c.cmd)); got != c.want {
			t.Errorf("%q: %q, want %q", c.cmd, got, c.want)
		}
	}
	// The control: without it, the same terminal reads 0 0.
	if got := onBareTerminal(t, []string{"stty", "size"}); got != "0 0" {
		t.Fatalf("control: a terminal of no size reads %q", got)
	}
}

// onBareTerminal runs argv on a pty of no size and returns what it wrote.
func onBareTerminal(t *testing.T, argv []string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ := io.ReadAll(f) // EIO once the process is gone
	cmd.Wait()
	return strings.TrimSpace(string(out))
}
