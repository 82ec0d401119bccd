package commit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

func TestParse(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios}
	var got *Options
	run := func(_ context.Context, o *Options) error { got = o; return nil }
	cmd := NewCmdCommit(f, run)
	cmd.SetArgs([]string{"native-amd64-demo-hello-t1", "-m", "done"})
	if err := cmd.Execute(); err != nil || got.Instance != "native-amd64-demo-hello-t1" || got.Message != "done" {
		t.Fatalf("%v %+v", err, got)
	}
	cmd = NewCmdCommit(f, run)
	cmd.SetArgs([]string{})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	if err := cmd.Execute(); !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "-m") {
		t.Fatalf("no message: %v", err)
	}
}

// TestRunFindsCardAndChecksRecords: the card is found from a directory
// inside it; a .git replaced after an instance recorded it is refused.
func TestRunFindsCardAndChecksRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	base := t.TempDir()
	ws, card, home := filepath.Join(base, "ws"), filepath.Join(base, "ws", "inf", "bss"), filepath.Join(base, "home")
	for _, d := range []string{filepath.Join(card, "t1"), home} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = S\n\temail = s@x\n"), 0o644)
	os.WriteFile(filepath.Join(card, "t1", "a.c"), []byte("x\n"), 0o644)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	git := exec.Command("git", "init", "-q", card)
	git.Env = env
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	reg, _ := registry.Open(filepath.Join(base, "state"))
	ios, _, out, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios,
		Registry:  func() (*registry.Registry, error) { return reg, nil },
		Workspace: func() (*workspace.Workspace, error) { return workspace.Open(ws) },
	}
	opts := &Options{F: f, Message: "first", Env: env, Getwd: func() (string, error) { return filepath.Join(card, "t1"), nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, opts); err != nil || !strings.Contains(out.String(), "committed ") {
		t.Fatalf("commit from t1: %v %s", err, out.String())
	}
	opts.Getwd = func() (string, error) { return ws, nil }
	if err := Run(ctx, opts); err == nil || !strings.Contains(err.Error(), "not inside a card") {
		t.Fatalf("from the workspace root: %v", err)
	}
	// An instance recorded this .git; it is replaced.
	id, _ := cardgit.Inspect(card)
	reg.Put(ctx, registry.Record{Instance: "native-amd64-inf-bss-t1", CardPath: card, Git: &id})
	os.Rename(filepath.Join(card, ".git"), filepath.Join(base, "old-git"))
	os.MkdirAll(filepath.Join(card, ".git"), 0o755)
	os.WriteFile(filepath.Join(card, "t1", "a.c"), []byte("y\n"), 0o644)
	opts.Instance = "native-amd64-inf-bss-t1"
	if err := Run(ctx, opts); err == nil || !strings.Contains(err.Error(), "another directory than the instance was created with") {
		t.Fatalf("replaced .git: %v", err)
	}
}
