package cardgit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// withHook runs f at step of commitStaged during the test.
func withHook(t *testing.T, step string, f func()) {
	t.Helper()
	testHook = func(s string) {
		if s == step {
			f()
		}
	}
	t.Cleanup(func() { testHook = nil })
}

// objectsHold reports whether any object in the card's repository (the
// quarantine included, were it left) holds needle.
func (g *gitRepo) objectsHold(t *testing.T, needle string) bool {
	t.Helper()
	cmd := exec.Command("sh", "-c", `git cat-file --batch-all-objects --batch; for d in .git/objects/stem-incoming-*; do [ -d "$d" ] && GIT_OBJECT_DIRECTORY="$d" GIT_ALTERNATE_OBJECT_DIRECTORIES="$PWD/.git/objects" git cat-file --batch-all-objects --batch; done; true`)
	cmd.Dir, cmd.Env = g.card, g.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("list objects: %v\n%s", err, out)
	}
	return strings.Contains(string(out), needle)
}

// leftBehind lists quarantines and lock files a commit left in .git.
func (g *gitRepo) leftBehind(t *testing.T) []string {
	t.Helper()
	var out []string
	filepath.Walk(filepath.Join(g.card, ".git"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && (strings.HasPrefix(fi.Name(), "stem-incoming-") || strings.HasSuffix(fi.Name(), ".lock") || strings.HasPrefix(fi.Name(), "tmp_")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestCommitStagesLikeAddAll(t *testing.T) {
	g := newGitRepo(t)
	write(t, filepath.Join(g.card, "gone.c"), "x\n")
	write(t, filepath.Join(g.card, "build/kept.o"), "tracked though ignored\n")
	g.git(t, "add", "-A")
	g.git(t, "commit", "-qm", "more")
	write(t, filepath.Join(g.card, ".gitignore"), "build/\n*.tmp\n")
	write(t, filepath.Join(g.card, "t1/.gitignore"), "local.txt\n")
	write(t, filepath.Join(g.card, "build/new.o"), "ignored\n")
	write(t, filepath.Join(g.card, "t1/local.txt"), "ignored\n")
	write(t, filepath.Join(g.card, "t1/x.tmp"), "ignored\n")
	write(t, filepath.Join(g.card, "build/kept.o"), "changed\n")
	write(t, filepath.Join(g.card, "t1/main.c"), "int main(void) { return 3; }\n")
	write(t, filepath.Join(g.card, "t2/new dir/ünï code.c"), "new\n")
	os.Remove(filepath.Join(g.card, "gone.c"))
	os.Chmod(filepath.Join(g.card, "t1/main.c"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(g.card, "t1/link"))
	write(t, filepath.Join(g.card, ".stem/instances/i/state"), "x\n")
	if _, err := g.commit(t, "# comment\nsubject  \n\n\n\nbody\n"); err != nil {
		t.Fatal(err)
	}
	got := g.git(t, "ls-tree", "-r", "--full-tree", "HEAD")
	for _, want := range []string{"100644 blob", "build/kept.o", "t1/.gitignore", "100755 blob", "t1/main.c", "120000 blob", "t1/link", "t2/new dir/"} {
		if !strings.Contains(got, want) {
			t.Errorf("commit lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"gone.c", "new.o", "local.txt", "x.tmp", ".stem"} {
		if strings.Contains(got, not) {
			t.Errorf("commit holds %q:\n%s", not, got)
		}
	}
	if link := g.git(t, "cat-file", "-p", "HEAD:t1/link"); link != "/etc/passwd" {
		t.Errorf("symlink stored as %q, not its link text", link)
	}
	if msg := g.git(t, "log", "-1", "--format=%B"); msg != "subject\n\nbody\n\n" {
		t.Errorf("message %q", msg)
	}
	if st := g.git(t, "status", "--porcelain"); st != "?? .stem/\n" {
		t.Errorf("git status after the commit:\n%s", st)
	}
	if left := g.leftBehind(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	// Plain git agrees on the tree (the control for the semantics).
	g.git(t, "reset", "-q", "--soft", "HEAD~")
	g.git(t, "add", "-A")
	g.git(t, "reset", "-q", "--", ".stem")
	if tree := g.git(t, "write-tree"); strings.TrimSpace(tree) != strings.TrimSpace(g.git(t, "rev-parse", "ORIG_HEAD^{tree}")) {
		t.Errorf("git add --all would have staged another tree: %s", g.git(t, "diff", "--cached", "--stat", "ORIG_HEAD"))
	}
}

// A host directory with a canary only the student can read, and a
// directory of the card swapped for a symlink to it after stem listed the
// card: stem refuses (or stores the link), never the canary.
func TestCommitSwappedDirectory(t *testing.T) {
	g := newGitRepo(t)
	host := filepath.Join(filepath.Dir(g.card), "host")
	write(t, filepath.Join(host, "CANARY_secret"), "CANARY-6b1f\n")
	write(t, filepath.Join(g.card, "z/CANARY_secret"), "decoy\n")
	os.Symlink(host, filepath.Join(g.card, "zl"))
	exchange := func() {
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(g.card, "z"), unix.AT_FDCWD, filepath.Join(g.card, "zl"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	withHook(t, "listed", exchange)
	_, err := g.commit(t, "swap")
	if err == nil || !strings.Contains(err.Error(), "changed while stem read it") {
		t.Fatalf("swapped directory: %v", err)
	}
	if g.objectsHold(t, "CANARY-6b1f") {
		t.Fatal("the host canary is in the card's objects")
	}
	if left := g.leftBehind(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	// Control: a path-based reader (what git add does once it has listed
	// z) reads the host file.
	if b, _ := os.ReadFile(filepath.Join(g.card, "z/CANARY_secret")); string(b) != "CANARY-6b1f\n" {
		t.Fatalf("control: reading z/CANARY_secret by path gave %q", b)
	}
	testHook = nil
	// The swapped state committed: z is a symlink, stored as its text.
	if _, err := g.commit(t, "links"); err != nil {
		t.Fatal(err)
	}
	if g.objectsHold(t, "CANARY-6b1f") {
		t.Fatal("the host canary is in the card's objects")
	}
	if got := g.git(t, "cat-file", "-p", "HEAD:z"); got != host {
		t.Fatalf("z stored as %q", got)
	}
}

func TestCommitLatePlantedRepository(t *testing.T) {
	g := newGitRepo(t)
	write(t, filepath.Join(g.card, "sub/notes.txt"), "mine\n")
	other := filepath.Join(filepath.Dir(g.card), "prepared")
	exec.Command("git", "init", "-q", other).Run()
	plant := func() {
		if err := os.Rename(filepath.Join(other, ".git"), filepath.Join(g.card, "sub/.git")); err != nil {
			t.Fatal(err)
		}
	}
	// Planted after Check, before stem lists the card: refused.
	withHook(t, "walk", plant)
	_, err := g.commit(t, "x")
	if ps := Problems(err); len(ps) != 1 || !ps[0].Nested || !strings.Contains(ps[0].Path, "sub/.git") {
		t.Fatalf("planted before the walk: %v", err)
	}
	os.Rename(filepath.Join(g.card, "sub/.git"), filepath.Join(other, ".git"))
	// Planted after the listing: not staged, no gitlink.
	withHook(t, "listed", plant)
	if _, err := g.commit(t, "y"); err != nil {
		t.Fatal(err)
	}
	if got := g.git(t, "ls-tree", "-r", "HEAD"); strings.Contains(got, "160000") || strings.Contains(got, ".git") {
		t.Fatalf("commit holds the planted repository:\n%s", got)
	}
	// Control: plain git add stages it as a gitlink (once sub is not
	// tracked as a directory of files).
	testHook = nil
	g.git(t, "-c", "user.name=x", "-c", "user.email=x@x", "-C", "sub", "commit", "-q", "--allow-empty", "-m", "c")
	g.git(t, "rm", "-rq", "--cached", "sub")
	g.git(t, "add", "-A")
	if got := g.git(t, "ls-files", "-s"); !strings.Contains(got, "160000") {
		t.Fatalf("control: git add staged no gitlink:\n%s", got)
	}
}

func TestCommitBounds(t *testing.T) {
	g := newGitRepo(t)
	head := g.git(t, "rev-parse", "HEAD")
	f, err := os.Create(filepath.Join(g.card, "t1/notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(200 << 30) // sparse: 200 GB of nothing on disk
	f.Close()
	_, err = g.commit(t, "big")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "t1/notes.txt") {
		t.Fatalf("sparse 200 GB file: %v", err)
	}
	os.Remove(filepath.Join(g.card, "t1/notes.txt"))
	for i := 0; i < 5; i++ {
		write(t, filepath.Join(g.card, "t2", string(rune('a'+i))), "x")
	}
	id, _ := Inspect(g.card)
	_, err = Commit(context.Background(), CommitOptions{Card: g.card, Want: []Identity{id}, Message: "m", Env: g.env(), Limits: Limits{Files: 3, FileSize: 100, Bytes: 1000}})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 3 files") {
		t.Fatalf("file count: %v", err)
	}
	_, err = Commit(context.Background(), CommitOptions{Card: g.card, Want: []Identity{id}, Message: "m", Env: g.env(), Limits: Limits{Files: 30, FileSize: 100, Bytes: 4}})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "together") {
		t.Fatalf("total bytes: %v", err)
	}
	if got := g.git(t, "rev-parse", "HEAD"); got != head {
		t.Fatal("HEAD moved")
	}
	if left := g.leftBehind(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestCommitRefusesSpecialFiles(t *testing.T) {
	g := newGitRepo(t)
	fifo := filepath.Join(g.card, "t1/main.c")
	// A FIFO in place of a tracked file after the listing: a git that
	// opened it would block.
	withHook(t, "listed", func() {
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	_, err := g.commit(t, "fifo")
	if !errors.Is(err, ErrSpecial) || !strings.Contains(err.Error(), "t1/main.c is a named pipe") {
		t.Fatalf("fifo: %v", err)
	}
	testHook = nil
	if _, err := g.commit(t, "fifo"); !errors.Is(err, ErrSpecial) {
		t.Fatalf("fifo present from the start: %v", err)
	}
	// Ignored, it is no problem.
	write(t, filepath.Join(g.card, ".gitignore"), "t1/main.c\n")
	g.git(t, "rm", "-q", "--cached", "t1/main.c")
	if _, err := g.commit(t, "ignored fifo"); err != nil {
		t.Fatal(err)
	}
	if left := g.leftBehind(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// An interrupted commit (Ctrl-C cancels stemctl's context) leaves .git
// as it was.
func TestCommitInterrupted(t *testing.T) {
	g := newGitRepo(t)
	write(t, filepath.Join(g.card, "t1/main.c"), "changed\n")
	head := g.git(t, "rev-parse", "HEAD")
	for _, step := range []string{"listed", "staged", "committed"} {
		ctx, cancel := context.WithCancel(context.Background())
		withHook(t, step, cancel)
		id, _ := Inspect(g.card)
		_, err := Commit(ctx, CommitOptions{Card: g.card, Want: []Identity{id}, Message: "m", Env: g.env()})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at %s: %v", step, err)
		}
		if got := g.git(t, "rev-parse", "HEAD"); got != head {
			t.Fatalf("cancelled at %s: HEAD moved", step)
		}
		if left := g.leftBehind(t); len(left) > 0 {
			t.Fatalf("cancelled at %s: left behind: %v", step, left)
		}
		if g.objectsHold(t, "changed\n") {
			t.Fatalf("cancelled at %s: the new blob is in .git", step)
		}
	}
}

// An unborn branch, in a SHA-1 and a SHA-256 repository.
func TestCommitFirstCommit(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			g := newGitRepo(t)
			os.RemoveAll(filepath.Join(g.card, ".git"))
			g.git(t, "init", "-q", "--object-format="+format)
			res, err := g.commit(t, "first")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(g.git(t, "rev-parse", "HEAD")); got != res.Commit {
				t.Fatalf("HEAD %s, commit %s", got, res.Commit)
			}
			if st := g.git(t, "status", "--porcelain"); st != "" {
				t.Fatalf("status:\n%s", st)
			}
			g.git(t, "fsck", "--strict")
		})
	}
}

// A directory renamed away between the listing and the read: its files
// are not in the card any more, and the commit goes on without them.
func TestCommitDirectoryGone(t *testing.T) {
	g := newGitRepo(t)
	write(t, filepath.Join(g.card, "d/a.c"), "a\n")
	write(t, filepath.Join(g.card, "t1/main.c"), "changed\n")
	withHook(t, "listed", func() {
		if err := os.Rename(filepath.Join(g.card, "d"), filepath.Join(filepath.Dir(g.card), "d")); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := g.commit(t, "gone"); err != nil {
		t.Fatal(err)
	}
	if got := g.git(t, "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(got, "d/a.c") {
		t.Fatalf("commit holds a file no longer in the card:\n%s", got)
	}
}

// A symlink swapped for a directory after the listing: refused as a
// change, not as a special file.
func TestCommitSymlinkTurnedDirectory(t *testing.T) {
	g := newGitRepo(t)
	os.Symlink("t1", filepath.Join(g.card, "l"))
	mkdirs(t, g.card, "d")
	withHook(t, "listed", func() {
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(g.card, "l"), unix.AT_FDCWD, filepath.Join(g.card, "d"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := g.commit(t, "x"); err == nil || !strings.Contains(err.Error(), "l changed while stem read it") {
		t.Fatalf("symlink turned directory: %v", err)
	}
}
