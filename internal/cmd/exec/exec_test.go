package exec_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/down"
	"github.com/stem-edu/stem/internal/cmd/exec"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
	"github.com/stem-edu/stem/internal/engine"
)

const inst = "native-amd64-demo-hello-t1"

// TestExecPassesCommandAndExitCode: the command after -- runs with the
// extra environment, its output reaches
// stdout and its exit status is stemctl's; usage mistakes say the form.
func TestExecPassesCommandAndExitCode(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	var got engine.ExecSpec
	w.Engine.ExecFunc = func(_ engine.Container, spec engine.ExecSpec) (int, error) {
		got = spec
		io.WriteString(spec.Stdout, "hello from the container\n")
		return 3, nil
	}
	err := w.Run(exec.NewCmdExec(w.F, nil), inst, "-e", "A=b", "--tty", "never", "--", "ls", "-la")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("exec: %v, want exit status 3", err)
	}
	// The command goes to the shell as arguments, never as text.
	if n := len(got.Cmd); n < 2 || strings.Join(got.Cmd[n-2:], " ") != "ls -la" || got.Env["A"] != "b" || got.Tty {
		t.Fatalf("ran %+v", got)
	}
	if w.Out.String() != "hello from the container\n" {
		t.Fatalf("stdout %q", w.Out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{inst, "ls"}, "needs --"},
		{[]string{inst, "--"}, "no command after --"},
	} {
		if err := w.Run(exec.NewCmdExec(w.F, nil), c.args...); !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("exec %v: %v", c.args, err)
		}
	}
	// A stopped instance: exec says how to start it and runs nothing.
	if err := w.Run(down.NewCmdDown(w.F, nil), inst); err != nil {
		t.Fatal(err)
	}
	got = engine.ExecSpec{}
	if err := w.Run(exec.NewCmdExec(w.F, nil), inst, "--", "ls"); err == nil || !strings.Contains(err.Error(), "stemctl up native-amd64 demo hello 1") || got.Cmd != nil {
		t.Fatalf("exec in a stopped instance: %v (ran %v)", err, got.Cmd)
	}
}
