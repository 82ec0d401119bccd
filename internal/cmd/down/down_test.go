package down_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/down"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// TestDownKeepsUnsavedWork: with unsaved buffers down stops nothing and
// names them; --force stops; the message says how to start it again.
func TestDownKeepsUnsavedWork(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	w.Unsaved = []string{"t1/words.c"}
	err := w.Run(down.NewCmdDown(w.F, nil), inst)
	if err == nil || !strings.Contains(err.Error(), "unsaved changes in t1/words.c") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("down with unsaved work: %v", err)
	}
	if !running(t, w) {
		t.Fatal("down stopped the instance though the editor had unsaved work")
	}
	// An editor that does not say (it waits at a prompt) may hold unsaved
	// work as well.
	w.Unsaved, w.UnsavedErr = nil, errors.New("nvim is waiting for input")
	err = w.Run(down.NewCmdDown(w.F, nil), inst)
	if err == nil || !strings.Contains(err.Error(), "does not say whether it has unsaved changes") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("down with an editor at a prompt: %v", err)
	}
	if !running(t, w) || w.Quit != 0 {
		t.Fatalf("down stopped the instance (or quit its editor: %d) though the editor did not answer", w.Quit)
	}
	if err := w.Run(down.NewCmdDown(w.F, nil), inst, "--force"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.Out.String(), "stopped (start it again with `stemctl up native-amd64 demo hello 1") || running(t, w) {
		t.Fatalf("down --force: %s", w.Out)
	}
	if w.Quit != 1 {
		t.Fatalf("down --force ended the editor %d times, want once (its swap files go with it)", w.Quit)
	}
}

func running(t *testing.T, w *cmdtest.World) bool {
	t.Helper()
	reg, _ := w.F.Registry()
	rec, err := reg.Get(t.Context(), inst)
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.Engine.Inspect(t.Context(), rec.ContainerID)
	return err == nil && c.Running
}
