package cardgit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes a card repository with one commit, a HOME with an
// identity, and an evil program that touches canary when run.
type gitRepo struct {
	card, home, evil, canary string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if testing.Short() {
		t.Skip("runs git")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: apt-get install git")
	}
	base := t.TempDir()
	g := &gitRepo{card: filepath.Join(base, "card"), home: filepath.Join(base, "home"), evil: filepath.Join(base, "evil"), canary: filepath.Join(base, "CANARY")}
	mkdirs(t, base, "card/t1", "home")
	write(t, filepath.Join(g.home, ".gitconfig"), "[user]\n\tname = Student\n\temail = s@example.org\n[init]\n\tdefaultBranch = main\n")
	if err := os.WriteFile(g.evil, []byte("#!/bin/sh\necho \"$0 $*\" >> "+g.canary+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(g.card, "t1/main.c"), "int main(void) { return 0; }\n")
	g.git(t, "init", "-q")
	g.git(t, "add", "-A")
	g.git(t, "commit", "-qm", "card as shipped")
	return g
}

func (g *gitRepo) env() []string {
	return []string{"HOME=" + g.home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1"}
}

// git is plain git on the host, as a student would run it.
func (g *gitRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = g.card, g.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (g *gitRepo) commit(t *testing.T, msg string) (CommitResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := Inspect(g.card)
	if err != nil {
		t.Fatal(err)
	}
	return Commit(ctx, CommitOptions{Card: g.card, Want: []Identity{id}, Message: msg, Env: g.env()})
}

func (g *gitRepo) canaryRan() bool {
	_, err := os.Stat(g.canary)
	return err == nil
}

func TestCommitRunsNoHookNorFilter(t *testing.T) {
	g := newGitRepo(t)
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-index-change", "fsmonitor-watchman"} {
		os.WriteFile(filepath.Join(g.card, ".git/hooks", h), []byte("#!/bin/sh\n"+g.evil+" "+h+"\n"), 0o755)
	}
	// Drivers the student's own config defines, chosen by attributes in
	// the work tree (which the container writes).
	g.git(t, "config", "filter.x.clean", g.evil)
	g.git(t, "config", "filter.x.smudge", g.evil)
	g.git(t, "config", "filter.x.required", "true")
	g.git(t, "config", "diff.y.textconv", g.evil)
	g.git(t, "config", "core.fsmonitor", g.evil)
	write(t, filepath.Join(g.card, ".gitattributes"), "* filter=x diff=y\n")
	write(t, filepath.Join(g.card, "t1/main.c"), "int main(void) { return 1; }\n")
	write(t, filepath.Join(g.card, ".stem/instances/i/bash_history"), "ls\n")
	res, err := g.commit(t, "task 1 done")
	if err != nil {
		t.Fatal(err)
	}
	if g.canaryRan() {
		b, _ := os.ReadFile(g.canary)
		t.Fatalf("stem's commit ran a program from the repository's config or hooks:\n%s", b)
	}
	if len(res.Commit) != 40 {
		t.Fatalf("commit id %q", res.Commit)
	}
	files := g.git(t, "show", "--name-only", "--format=%s", "HEAD")
	if !strings.Contains(files, "task 1 done") || !strings.Contains(files, "t1/main.c") || strings.Contains(files, ".stem") {
		t.Fatalf("commit content:\n%s", files)
	}
	// Control: plain git here does run them.
	write(t, filepath.Join(g.card, "t1/main.c"), "int main(void) { return 2; }\n")
	g.git(t, "commit", "-qam", "plain")
	if !g.canaryRan() {
		t.Fatal("control: plain git ran none of the hooks and drivers: the test proves nothing")
	}
}

func TestCommitRefusesConfigFromTheWorkTree(t *testing.T) {
	g := newGitRepo(t)
	write(t, filepath.Join(g.card, "t1/inc.cfg"), "[user]\n\tname = Container\n")
	g.git(t, "config", "include.path", "../t1/inc.cfg")
	write(t, filepath.Join(g.card, "t1/main.c"), "changed\n")
	_, err := g.commit(t, "x")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(g.card, "t1/inc.cfg")) {
		t.Fatalf("include from the work tree: %v", err)
	}
}

func TestCommitRefusesNestedAndReplaced(t *testing.T) {
	g := newGitRepo(t)
	id, _ := Inspect(g.card)
	mkdirs(t, g.card, "t1/x/.git/hooks")
	_, err := Commit(context.Background(), CommitOptions{Card: g.card, Want: []Identity{id}, Message: "x", Env: g.env()})
	if len(Problems(err)) != 1 || !Problems(err)[0].Nested {
		t.Fatalf("nested: %v", err)
	}
	os.RemoveAll(filepath.Join(g.card, "t1/x"))
	os.Rename(filepath.Join(g.card, ".git"), filepath.Join(g.card, ".git-old"))
	exec.Command("cp", "-a", filepath.Join(g.card, ".git-old"), filepath.Join(g.card, ".git")).Run()
	_, err = Commit(context.Background(), CommitOptions{Card: g.card, Want: []Identity{id}, Message: "x", Env: g.env()})
	// The .git aside looks like a bare repository: reported too.
	if ps := Problems(err); len(ps) != 2 || ps[0].Nested || !ps[1].Nested {
		t.Fatalf("replaced .git: %v", err)
	}
}

func TestCommitEdges(t *testing.T) {
	g := newGitRepo(t)
	if _, err := g.commit(t, "nothing"); !errors.Is(err, ErrNothing) {
		t.Fatalf("nothing to commit: %v", err)
	}
	if _, err := g.commit(t, " "); err == nil || !strings.Contains(err.Error(), "-m") {
		t.Fatalf("empty message: %v", err)
	}
	// The caller's GIT_DIR and GIT_CONFIG_* do not move the commit
	// elsewhere nor add configuration.
	other := t.TempDir()
	exec.Command("git", "init", "-q", other).Run()
	write(t, filepath.Join(g.card, "t1/main.c"), "changed\n")
	env := append(g.env(), "GIT_DIR="+filepath.Join(other, ".git"), "GIT_WORK_TREE="+other,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0="+other)
	id, _ := Inspect(g.card)
	res, err := Commit(context.Background(), CommitOptions{Card: g.card, Want: []Identity{id}, Message: "pinned", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if head := strings.TrimSpace(g.git(t, "rev-parse", "HEAD")); head != res.Commit {
		t.Fatalf("commit %s is not the card's HEAD %s", res.Commit, head)
	}
	// .stem/ listed in .gitignore (as the docs advise) is no error.
	write(t, filepath.Join(g.card, ".gitignore"), ".stem/\n")
	write(t, filepath.Join(g.card, ".stem/instances/i/bash_history"), "ls\n")
	if _, err := g.commit(t, "ignored state"); err != nil {
		t.Fatalf("with .stem/ ignored: %v", err)
	}
	// A card that is not a repository (stem's empty .git).
	card := t.TempDir()
	id2, _ := Prepare(card)
	_, err = Commit(context.Background(), CommitOptions{Card: card, Want: []Identity{id2}, Message: "x", Env: g.env()})
	if err == nil || !strings.Contains(err.Error(), "git init") {
		t.Fatalf("empty .git: %v", err)
	}
}

func TestDriverOverrides(t *testing.T) {
	es, err := parseConfigList([]byte("file:/h/.gitconfig\x00filter.lfs.clean\ngit-lfs clean -- %f\x00file:.git/config\x00filter.A=b.Process\nx\x00file:.git/config\x00diff.y.textconv\nz\x00command line:\x00merge.m.driver\nq\x00file:.git/config\x00filter.lfs.required\x00"))
	if err != nil {
		t.Fatal(err)
	}
	got := driverOverrides(es)
	want := []setting{{"filter.lfs.clean", ""}, {"filter.A=b.Process", ""}, {"diff.y.textconv", ""}, {"merge.m.driver", ""}, {"filter.lfs.required", "false"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A card that is a linked worktree (.git is a gitdir: file naming a
// directory outside the card) commits through that directory.
func TestCommitLinkedWorktree(t *testing.T) {
	g := newGitRepo(t)
	card := filepath.Join(t.TempDir(), "wt")
	g.git(t, "worktree", "add", "-q", "-b", "student", card)
	id, err := Prepare(card)
	if err != nil || id.Kind != KindFile {
		t.Fatalf("prepare: %v %v", id, err)
	}
	write(t, filepath.Join(card, "t1/main.c"), "int main(void) { return 7; }\n")
	res, err := Commit(context.Background(), CommitOptions{Card: card, Want: []Identity{id}, Message: "from the worktree", Env: g.env()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(g.git(t, "rev-parse", "student")); got != res.Commit {
		t.Fatalf("branch student is %s, the commit %s", got, res.Commit)
	}
}
