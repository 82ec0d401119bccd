package cardgit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// zeroID is the "no ref yet" value update-ref checks for.
var zeroID = map[string]string{"sha1": strings.Repeat("0", 40), "sha256": strings.Repeat("0", 64)}

// testHook, when set, is called between the steps of commitStaged (tests).
var testHook func(step string)

// commitStaged stages the card through stem (stager) into a private index
// and a quarantine object directory, checks the tree git wrote against
// what stem read, makes the commit, moves the objects in, moves HEAD
// (only if it is still where it was) and makes the real index the one it
// built (what read-tree of the commit would write). A
// failure before the objects move in leaves .git as it was.
func commitStaged(ctx context.Context, r *runner, opt CommitOptions, lim Limits, out io.Writer) (string, error) {
	tmp, err := os.MkdirTemp("", "stem-commit-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	shadow := filepath.Join(tmp, "wt")
	if err := os.Mkdir(shadow, 0o700); err != nil {
		return "", err
	}
	r = r.with()
	r.workTree = shadow
	rp, err := r.repoInfo(ctx)
	if err != nil {
		return "", err
	}
	format, objects, head, headTree := rp.format, rp.objects, rp.head, rp.tree
	removeStale(objects)
	q, err := newQuarantine(objects, format)
	if err != nil {
		return "", err
	}
	defer q.remove()
	s := &stager{r: r, card: opt.Card, lim: lim, q: q, index: filepath.Join(tmp, "index"), known: map[string]bool{}}
	idx, err := r.output(ctx, "ls-files", "-s", "-z")
	if err != nil {
		return "", err
	}
	if s.tracked, err = lsEntries(idx, false); err != nil {
		return "", err
	}
	s.head = map[string]entry{}
	if head != "" {
		tree, err := r.output(ctx, "ls-tree", "-r", "-z", "--full-tree", head)
		if err != nil {
			return "", err
		}
		if s.head, err = lsEntries(tree, true); err != nil {
			return "", err
		}
	}
	for _, m := range []map[string]entry{s.tracked, s.head} {
		for _, e := range m {
			s.known[e.id] = true
		}
	}
	hook("walk")
	want, err := s.stage(ctx, shadow)
	if err != nil {
		return "", err
	}
	hook("staged")
	w := r.with(s.env()...)
	treeOut, err := w.output(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	tree := strings.TrimSpace(string(treeOut))
	if err := s.verify(ctx, tree, want); err != nil {
		return "", err
	}
	if tree == headTree {
		return "", ErrNothing
	}
	msg := cleanMessage(opt.Message)
	if msg == "" {
		return "", errors.New("the commit message is empty once comment lines are taken out: give one with -m")
	}
	args := []string{"commit-tree", tree}
	if head != "" {
		args = append(args, "-p", head)
	}
	cid, err := w.outputIn(ctx, []byte(msg), append(args, "-F", "-")...)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(cid))
	hook("committed")
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("commit of %s stopped: %w", opt.Card, err)
	}
	// From here on the commit is made: finish it even if interrupted,
	// so no lock file nor half-moved state is left.
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := q.migrate(); err != nil {
		return "", fmt.Errorf("card %s: %w (HEAD was not moved)", opt.Card, err)
	}
	old := head
	if old == "" {
		old = zeroID[format]
	}
	subject, _, _ := strings.Cut(msg, "\n")
	reflog := "commit: " + subject
	if head == "" {
		reflog = "commit (initial): " + subject
	}
	if _, err := r.output(fin, "update-ref", "-m", reflog, "HEAD", commit, old); err != nil {
		return "", fmt.Errorf("move HEAD to the new commit %s: %w", commit, err)
	}
	if err := installIndex(s.index, rp.index); err != nil {
		return commit, fmt.Errorf("commit %s made, but the index was not updated (git status will show the commit's changes as staged; git reset fixes it): %w", commit, err)
	}
	fmt.Fprintf(out, "[%.12s] %s: %d files and symlinks, %d new objects\n", commit, subject, len(want), q.written)
	return commit, nil
}

func hook(step string) {
	if testHook != nil {
		testHook(step)
	}
}

// repo is what commitStaged needs to know about the repository.
type repo struct {
	format, objects, index string // object format, objects directory, index file
	head, tree             string // HEAD's commit and tree; empty on an unborn branch
}

// repoInfo asks git for repo: one git on the usual path, three on an
// unborn branch. Relative paths are made absolute against the work tree
// (git's working directory).
func (r *runner) repoInfo(ctx context.Context) (repo, error) {
	args := []string{"rev-parse", "--show-object-format", "--git-path", "objects", "--git-path", "index"}
	out, err := r.output(ctx, append(args, "HEAD^{commit}", "HEAD^{tree}")...)
	if err != nil {
		// An unborn branch, or something else wrong: ask one at a time.
		if _, herr := r.output(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}"); herr == nil || !isExit(herr, 1) {
			return repo{}, err
		}
		if out, err = r.output(ctx, args...); err != nil {
			return repo{}, err
		}
		out = append(out, "\n\n"...)
	}
	f := strings.Split(string(out), "\n")
	if len(f) < 5 || f[0] == "" || f[1] == "" || f[2] == "" {
		return repo{}, fmt.Errorf("git rev-parse: unexpected output %q", out)
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(r.workTree, p)
	}
	return repo{format: f[0], objects: abs(f[1]), index: abs(f[2]), head: f[3], tree: f[4]}, nil
}

// installIndex makes the repository's index the one stem built and
// checked, with git's lock protocol: written to index.lock (created
// exclusively: a git running meanwhile holds it) and renamed over.
func installIndex(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	lock := to + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("lock the index: %w (another git running in the card?)", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, to)
	}
	if err != nil {
		os.Remove(lock)
	}
	return err
}

// isExit: err is a process's exit with code.
func isExit(err error, code int) bool {
	var ee interface{ ExitCode() int }
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// removeStale removes quarantines a killed stemctl left (an hour old).
func removeStale(objects string) {
	old, _ := filepath.Glob(filepath.Join(objects, "stem-incoming-*"))
	for _, p := range old {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(p)
		}
	}
}
