// Package clitest finds the agent CLIs (codex, claude, gemini) that
// scripts/install-agent-clis.sh installs into the repository's
// .cache/agent-clis, for tests that check what stem writes with the real
// readers of those files.
package clitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

// Bin returns the path of the named CLI or fails the test saying how to
// install it.
func Bin(t testing.TB, name string) string {
	t.Helper()
	needs.Real(t, "the "+name+" CLI")
	prefix := os.Getenv("AGENT_CLIS_PREFIX")
	if prefix == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("find the repository root: %v", err)
		}
		prefix = filepath.Join(root, ".cache", "agent-clis")
	}
	p := filepath.Join(prefix, "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s CLI not found at %s: run scripts/install-agent-clis.sh first (it installs codex, claude and gemini there)", name, p)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not in PATH; the agent CLIs need it (Debian: apt-get install -y nodejs)")
	}
	return p
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
