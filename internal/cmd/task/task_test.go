package task_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/task"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
	"github.com/stem-edu/stem/internal/engine"
)

// TestTaskRunsTheManifestCommand: `stemctl test` brings the instance up,
// runs the manifest's test command in the task's directory inside it,
// says what it runs, and exits with the command's code.
func TestTaskRunsTheManifestCommand(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	var mu sync.Mutex
	var ran []engine.ExecSpec
	w.Engine.ExecFunc = func(_ engine.Container, spec engine.ExecSpec) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, spec)
		return 2, nil
	}
	err := w.Run(task.NewCmd(w.F, task.Test, nil), "native-amd64", "demo", "hello", "1")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("stemctl test: %v, want exit status 2", err)
	}
	if !strings.Contains(w.ErrOut.String(), "stemctl: test in native-amd64-demo-hello-t1: make test") {
		t.Fatalf("stderr:\n%s", w.ErrOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || !strings.Contains(strings.Join(ran[0].Cmd, " "), "make test") || !strings.HasSuffix(ran[0].WorkDir, "/t1") {
		t.Fatalf("ran %+v", ran)
	}
}

// TestTaskWithoutTheVerb: a task with no deploy command says so and
// runs nothing.
func TestTaskWithoutTheVerb(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	w.Engine.ExecFunc = func(engine.Container, engine.ExecSpec) (int, error) {
		t.Error("a command ran")
		return 0, nil
	}
	err := w.Run(task.NewCmd(w.F, task.Deploy, nil), "native-amd64", "demo", "hello", "1")
	if err == nil || !strings.Contains(err.Error(), "deploy") {
		t.Fatalf("deploy on a task without one: %v", err)
	}
}
