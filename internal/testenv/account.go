package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binaries built for end-to-end tests, once per test process.
var built struct {
	mu   sync.Mutex
	dir  string
	done map[string]error
}

// BinDirEnv names a directory of prebuilt commands (stemctl, stem-mcp,
// stem-dial), built as Binary builds them from the tree under test: `make
// test` builds them once for every package instead of each package
// linking its own (about a minute of CPU a run on two cores).
const BinDirEnv = "STEM_TEST_BIN_DIR"

// Binary builds the main package pkg (a path relative to the repository,
// "./cmd/stemctl") as name, once per test process, static (CGO off: stem-mcp
// is mounted into containers), and returns the directory that holds it.
// A command under ./cmd/ that $STEM_TEST_BIN_DIR holds is copied from
// there instead. RemoveBinaries, from TestMain, deletes the directory.
func Binary(t testing.TB, name, pkg string) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "stem-test-bin")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.done = dir, map[string]error{}
	}
	err, ok := built.done[name]
	if p := prebuilt(pkg); !ok && p != "" {
		err = CopyFile(p, filepath.Join(built.dir, name), 0o755)
		built.done[name], ok = err, true
	}
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(built.dir, name), pkg)
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build %s: %v\n%s", pkg, berr, out)
		}
		cancel()
		built.done[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return built.dir
}

// prebuilt is $STEM_TEST_BIN_DIR's build of the command pkg, "" when
// there is none.
func prebuilt(pkg string) string {
	dir := os.Getenv(BinDirEnv)
	cmd, ok := strings.CutPrefix(pkg, "./cmd/")
	if dir == "" || !ok || strings.Contains(cmd, "/") {
		return ""
	}
	path := filepath.Join(dir, cmd)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return path
}

// CopyFile copies with cp, never through a descriptor of this process: a
// file the process holds open for writing is inherited by every child it
// forks meanwhile (other tests run side by side), and running the copy
// fails with "text file busy" until that child has exec'd.
func CopyFile(src, dst string, mode os.FileMode) error {
	if out, err := exec.Command("cp", "--", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp %s: %v: %s", src, err, bytes.TrimSpace(out))
	}
	return os.Chmod(dst, mode)
}

// RemoveBinaries deletes what Binary built; call it from TestMain after
// m.Run.
func RemoveBinaries() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
		built.dir, built.done = "", nil
	}
}

// AccountPrefix starts the name of every real account a test makes
// (package student's and the lab's), so a machine's leftovers can be told
// from its people.
const AccountPrefix = "stemt"

// Account is a private student account for running the stemctl binary the
// way a user does: its own runtime, state, config and home directories and
// a copy of the example workspace. Its cleanup stops agents and removes
// every instance it made.
type Account struct {
	T       testing.TB
	Bin     string   // directory with stemctl and stem-mcp
	Env     []string // the environment stemctl runs with
	Base    string   // home, state, config live here
	Runtime string   // XDG_RUNTIME_DIR
	WS      string   // STEM_WORKSPACE
	// Cred, when set, runs stemctl (and Command) as another user: the
	// non-root student of internal/testenv/student.
	Cred *syscall.Credential
}

// AccountOptions adjust NewAccount.
type AccountOptions struct {
	// RuntimeParent holds the runtime directory; default /tmp (short
	// socket paths).
	RuntimeParent string
	// Env is added to the account's environment.
	Env []string
}

// RequireAccount skips under -short and fails when a program an account's
// stemctl needs is missing; call it before building the binaries.
func RequireAccount(t testing.TB) {
	t.Helper()
	Require(t, "podman", "tmux")
}

// NewAccount makes an account using the stemctl and stem-mcp in bin.
func NewAccount(t testing.TB, bin string, opt AccountOptions) *Account {
	t.Helper()
	RequireAccount(t)
	if opt.RuntimeParent == "" {
		opt.RuntimeParent = "/tmp"
	}
	rt, err := os.MkdirTemp(opt.RuntimeParent, "sa")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	base := t.TempDir()
	a := &Account{T: t, Bin: bin, Base: base, Runtime: rt, WS: filepath.Join(base, "ws")}
	for _, d := range []string{"home", "state", "config"} {
		os.MkdirAll(filepath.Join(base, d), 0o700)
	}
	os.MkdirAll(a.WS, 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join(RepoRoot(), "examples", "workspace")+"/.", a.WS+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy the example workspace: %v %s", err, out)
	}
	a.Env = []string{
		"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + filepath.Join(base, "home"),
		"XDG_RUNTIME_DIR=" + rt, "STEM_STATE_DIR=" + filepath.Join(base, "state"), "STEM_CONFIG_DIR=" + filepath.Join(base, "config"),
		"STEM_WORKSPACE=" + a.WS, "STEM_MCP_BIN=" + filepath.Join(bin, "stem-mcp"), "TERM=xterm-256color",
	}
	if cc := os.Getenv("CONTAINERS_CONF"); cc != "" {
		a.Env = append(a.Env, "CONTAINERS_CONF="+cc)
	}
	a.Env = append(a.Env, opt.Env...)
	t.Cleanup(func() { a.RemoveAll(rt) })
	return a
}

// RemoveAll stops the account's agents, removes every instance it made,
// and then the directory dir (its runtime or base directory).
func (a *Account) RemoveAll(dir string) {
	a.Run(nil, "agent", "stop", "--all", "--timeout", "2s")
	out, _ := a.Run(nil, "list", "--json")
	var sts []struct {
		Record struct{ Instance string } `json:"record"`
	}
	json.Unmarshal([]byte(out.Stdout), &sts)
	for _, s := range sts {
		a.Run(nil, "rm", s.Record.Instance)
	}
	os.RemoveAll(dir)
}

// Result is how a stemctl run ended.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs stemctl with args (and extra environment) in the account, for at
// most three minutes. A non-zero exit is a Result, not an error.
func (a *Account) Run(extra []string, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), args...)
	cmd.Env = append(cmd.Env, extra...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := Result{Stdout: o.String(), Stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
		err = nil
	}
	return r, err
}

// Command is a command run the way the account's stemctl runs: with its
// environment, as its user.
func (a *Account) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{}, a.Env...)
	if a.Cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.Cred}
	}
	return cmd
}
