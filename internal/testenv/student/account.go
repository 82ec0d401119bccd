package student

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
)

// Account is one test's stem account as the student: a copy of the
// example workspace and its own stem state and config directories (in the
// student's home, owned by the student), the runtime directory the
// account has (/run/user/UID, where its Podman runs too), and stemctl and
// stem-mcp from bin copied where the student can run them. Run and
// Command run as the student. Its cleanup removes every instance it made.
func (s *Student) Account(t testing.TB, bin string) *testenv.Account {
	t.Helper()
	sbin, err := s.binaries(bin)
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp(s.Home, "acct")
	if err != nil {
		t.Fatal(err)
	}
	a := &testenv.Account{T: t, Bin: sbin, Base: base, Runtime: s.Runtime, WS: filepath.Join(base, "ws"), Cred: s.Cred()}
	for _, d := range []string{"state", "config", "ws"} {
		os.MkdirAll(filepath.Join(base, d), 0o700)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(testenv.RepoRoot(), "examples", "workspace")+"/.", a.WS+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy the example workspace: %v %s", err, out)
	}
	if err := s.chown(base); err != nil {
		t.Fatal(err)
	}
	a.Env = append(s.Env(),
		"PATH="+sbin+":"+os.Getenv("PATH"),
		"STEM_STATE_DIR="+filepath.Join(base, "state"), "STEM_CONFIG_DIR="+filepath.Join(base, "config"),
		"STEM_WORKSPACE="+a.WS, "STEM_MCP_BIN="+filepath.Join(sbin, "stem-mcp"))
	t.Cleanup(func() { a.RemoveAll(base) })
	return a
}

// binaries copies stemctl and stem-mcp from bin into a directory the
// student can read (a test's build directory is root's, mode 0700).
func (s *Student) binaries(bin string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.bins[bin]; ok {
		return d, nil
	}
	d, err := os.MkdirTemp("", "stem-student-bin")
	if err != nil {
		return "", err
	}
	os.Chmod(d, 0o755)
	for _, name := range []string{"stemctl", "stem-mcp"} {
		if err := testenv.CopyFile(filepath.Join(bin, name), filepath.Join(d, name), 0o755); err != nil {
			os.RemoveAll(d)
			return "", fmt.Errorf("copy %s for the student: %w", name, err)
		}
	}
	s.bins[bin] = d
	return d, nil
}

// Podman runs podman as the student (its own rootless storage and service).
func (s *Student) Podman(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return output(s.Command(ctx, "podman", args...))
}
