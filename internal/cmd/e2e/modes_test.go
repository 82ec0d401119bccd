package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// podmanModes are the two ways a student's Podman runs: root's, and the
// student's own rootless Podman as a non-root account.
var podmanModes = []string{"rootful", "rootless"}

// modeAccount is an account of mode: root with root's Podman, or a fresh
// non-root student with rootless Podman.
func modeAccount(t *testing.T, mode string) *account {
	t.Helper()
	if mode == "rootful" {
		return newAccount(t)
	}
	bin := bins(t)
	return &account{Account: student.Get(t, "localhost/stem-native-amd64:latest").Account(t, bin), t: t}
}

// host is a command on the host as the account's user: root's own
// environment rootful (root's Podman), the student's rootless.
func (a *account) host(ctx context.Context, name string, args ...string) *exec.Cmd {
	if a.Cred == nil {
		return exec.CommandContext(ctx, name, args...)
	}
	return a.Command(ctx, name, args...)
}

// askEnv makes the test binary (see TestMain) an asker: it puts the
// question in its arguments to the student through the spool of the
// account's state directory, as stem-mcp does, and prints the answer.
const askEnv = "STEM_E2E_ASK_STATE"

// askHelper is the asker's main: args are instance, question id, text.
func askHelper(state string, args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "ask: want instance, id, text")
		return 2
	}
	sp, err := decision.Open(state, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ask:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	q := decision.Question{ID: args[1], Kind: "approval", From: "agent codex", Text: args[2],
		Choices: []decision.Choice{decision.Yes, decision.No, decision.While}, Expires: time.Now().Add(time.Hour)}
	a, err := sp.Ask(ctx, q)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ask:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		fmt.Fprintln(os.Stderr, "ask:", err)
		return 1
	}
	return 0
}

// asker is a copy of the test binary the account's user can run.
func (a *account) asker(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(a.Base, "asker")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if c := a.Cred; c != nil {
		if err := os.Chown(p, int(c.Uid), int(c.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
