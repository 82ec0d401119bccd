// Package e2e tries every route by which code in a task container could
// make git on the host run its code, against real containers made by
// stemctl up, rootful (root's Podman) and rootless (a non-root student with
// its own Podman, internal/testenv/student). After each attack the student
// runs the git commands a student runs, in a pseudo-terminal (so pagers
// and editors start as they would), and a canary file on the host must not
// appear. Each route has a control: the same attack in a container with
// the card mounted as stem mounted it before .git became a read-only mount
// point (card writable, only .git/hooks and .git/config read-only), where
// the canary does appear.
package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

const image = "localhost/stem-native-amd64:latest"

func TestMain(m *testing.M) {
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// world is one account (root's, or the student's) with a loopback HTTP
// server that asks for credentials (so a credential helper would run).
type world struct {
	t    *testing.T
	a    *testenv.Account
	mode string
	s    *student.Student // nil: rootful
	http *httptest.Server
}

func bins(t *testing.T) string {
	t.Helper()
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	return testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
}

func newWorld(t *testing.T, rootless bool) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Podman containers")
	}
	testenv.Require(t, "podman", "tmux", "git")
	w := &world{t: t, mode: "rootful"}
	if rootless {
		w.mode = "rootless"
		w.s = student.Get(t, image)
		w.a = w.s.Account(t, bins(t))
	} else {
		w.a = testenv.NewAccount(t, bins(t), testenv.AccountOptions{})
		home := filepath.Join(w.a.Base, "home")
		os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Test Student\n\temail = student@example.org\n[init]\n\tdefaultBranch = main\n"), 0o644)
	}
	w.http = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("WWW-Authenticate", `Basic realm="stem-test"`)
		rw.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(w.http.Close)
	return w
}

// sh runs a shell script on the host as the account's user, in dir.
func (w *world) sh(dir, script string, env ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := w.a.Command(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (w *world) mustSh(dir, script string) string {
	w.t.Helper()
	out, err := w.sh(dir, script)
	if err != nil {
		w.t.Fatalf("on the host: %v\n%s\n%s", err, script, out)
	}
	return out
}

// stemctl runs stemctl as the account's user.
func (w *world) stemctl(args ...string) testenv.Result {
	w.t.Helper()
	r, err := w.a.Run(nil, args...)
	if err != nil {
		w.t.Fatalf("stemctl %v: %v", args, err)
	}
	return r
}

func (w *world) must(args ...string) testenv.Result {
	w.t.Helper()
	r := w.stemctl(args...)
	if r.Code != 0 {
		w.t.Fatalf("stemctl %v: exit %d\n%s\n%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// cardManifest has two native tasks, so two instances of one card can run.
const cardManifest = `schema = 1
[defaults]
build = "true"
[[tasks]]
id = "1"
profiles = ["native-amd64"]
dir = "t1"
[[tasks]]
id = "2"
profiles = ["native-amd64"]
dir = "t2"
`

// card makes <workspace>/g/<name>, a repository with a bare remote
// outside the card (origin), a branch "side" and main diverged from it on
// one file (so merge and rebase have work), all as the account's user.
func (w *world) card(name string) string {
	w.t.Helper()
	card := filepath.Join(w.a.WS, "g", name)
	remote := filepath.Join(w.a.Base, "remotes", name+".git")
	w.mustSh(w.a.WS, fmt.Sprintf(`set -e
mkdir -p %[1]s/t1 %[1]s/t2 %[2]s
cd %[1]s
cat > stem.toml <<'EOF'
%[3]sEOF
printf '.stem/\n.rv/\n' > .gitignore
printf 'int main(void) { return 0; }\n' > t1/hello.c
printf 'int x;\n' > t2/x.c
git init -q
git add -A
git commit -qm card
git init -q --bare %[2]s
git remote add origin %[2]s
git push -q origin main
git checkout -q -b side
printf 'int side;\n' >> t1/hello.c
git commit -qam side
git checkout -q main
printf 'int mine;\n' >> t1/hello.c
git commit -qam mine
`, q(card), q(remote), cardManifest))
	return card
}

// q quotes for sh.
func q(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// up brings the card's task up and returns the instance name.
func (w *world) up(name, task string) string {
	w.t.Helper()
	w.must("up", "native-amd64", "g", name, task)
	return fmt.Sprintf("native-amd64-g-%s-t%s", name, task)
}

// inside runs script in the instance's container, in the card.
func (w *world) inside(inst, script string) string {
	w.t.Helper()
	r := w.stemctl("exec", inst, "--", "sh", "-c", script)
	return r.Stdout + r.Stderr
}

// control runs script in a container made the way stem made them before
// .git became a read-only mount point: the card writable at its own path,
// .git/hooks and .git/config mounted read-only over it.
func (w *world) control(card, script string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"run", "--rm", "--network", "none", "--name", "stem-gitroute-" + filepath.Base(card) + "-" + w.mode,
		"-v", card + ":" + card, "-e", "STEM_CARD_PATH=" + card, "-w", card}
	for _, p := range []string{".git/hooks", ".git/config"} {
		args = append(args, "-v", filepath.Join(card, p)+":"+filepath.Join(card, p)+":ro")
	}
	args = append(args, image, "sh", "-c", script)
	var cmd *exec.Cmd
	if w.s != nil {
		cmd = w.s.Command(ctx, "podman", args...)
	} else {
		cmd = exec.CommandContext(ctx, "podman", args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		w.t.Fatalf("control container: %v\n%s", err, out)
	}
	return string(out)
}

// battery is what a student runs on the host in the card: every git
// command the issue lists, in dir (the card root or a directory below
// it), whatever fails, and an alias a student may have the habit of
// (git st: only the repository's configuration could define it). EDITOR and PAGER are set the way a student's
// shell sets them; git's own variables are not (they would override the
// repository's configuration and hide an attack).
const battery = `
git status
git log -p -2
printf '// host\n' >> "$CARD/t1/hello.c"
git diff
git add -A
git commit -qm "host commit"
git commit --amend -q
git checkout -q -b tmpb
git checkout -q main
git switch -q tmpb
git switch -q main
git branch -q -D tmpb
printf '// stash\n' >> "$CARD/t1/hello.c"
git stash -q
git stash pop -q
git commit -qam second
git pull -q --no-rebase --no-edit origin main
git push -q origin main
git checkout -q -b work
printf 'int w;\n' >> "$CARD/t2/x.c"
git commit -qam work
git rebase -q side || git rebase --abort
git checkout -q -f main
git merge --no-edit side || git merge --abort
git submodule update --init
git st
true
`

// runBattery runs the battery as the account's user in a pseudo-terminal
// and returns what it printed.
func (w *world) runBattery(card, dir string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := w.a.Command(ctx, "sh", "-c", battery)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "CARD="+card, "EDITOR=true", "PAGER=cat", "GIT_TERMINAL_PROMPT=0", "TERM=xterm")
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 40, Cols: 120}, cmd.SysProcAttr)
	if err != nil {
		w.t.Fatalf("battery: %v", err)
	}
	defer f.Close()
	var out bytes.Buffer
	io.Copy(&out, f) // ends with EIO once the shell and its children exit
	cmd.Wait()
	if ctx.Err() != nil {
		w.t.Fatalf("the git battery in %s did not finish:\n%s", dir, out.String())
	}
	return out.String()
}

// statusJSON is `stemctl status INST --json`'s git part.
type statusJSON struct {
	State    string   `json:"state"`
	Problems []string `json:"problems"`
	Git      []struct {
		Path string `json:"path"`
	} `json:"git_problems"`
}

func (w *world) status(inst string) (statusJSON, testenv.Result) {
	w.t.Helper()
	r := w.stemctl("status", inst, "--json")
	var st statusJSON
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		w.t.Fatalf("status --json: %v\n%s\n%s", err, r.Stdout, r.Stderr)
	}
	return st, r
}

// canary is a path on the host, outside the card, that the attack's
// programs write; made anew for each run.
func (w *world) canary(name string) string {
	p := filepath.Join(w.a.Base, "canary-"+name)
	os.Remove(p)
	return p
}

func read(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// identity is "dev:ino" of a path on the host.
func identity(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// snapshot lists every path under dir with its type, mode and content
// digest, without following symlinks.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := ""
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(data))
		}
		fmt.Fprintf(&b, "%s %v %s\n", rel, fi.Mode(), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
