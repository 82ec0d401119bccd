package cardgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CommitOptions are what Commit needs.
type CommitOptions struct {
	// Card is the card repository's root.
	Card string
	// Want are the .git identities the card's instances were created
	// with (none for a card no instance records).
	Want []Identity
	// Message is the commit message (required: no editor is started).
	Message string
	// Git is the git program (default "git" on PATH).
	Git string
	// Env is the caller's environment; only PATH, HOME, the locale and
	// the author and committer variables are passed on.
	Env []string
	// Out receives git's summary of the commit.
	Out io.Writer
}

// CommitResult says what Commit did.
type CommitResult struct {
	// Commit is the new commit's id; empty when there was nothing to commit.
	Commit string `json:"commit,omitempty"`
	Card   string `json:"card"`
}

// ErrNothing is returned when the card has no changes to commit.
var ErrNothing = errors.New("nothing to commit")

// Commit stages every change in the card's work tree (except stem's own
// .stem/ and .rv/ state) and commits it, with git on the host pinned to
// the card's .git and reading nothing the container wrote: see the
// package doc. It refuses a card Check finds unsafe, a card whose .git is
// not yet a repository, and configuration included from the work tree.
func Commit(ctx context.Context, opt CommitOptions) (CommitResult, error) {
	res := CommitResult{Card: opt.Card}
	if strings.TrimSpace(opt.Message) == "" {
		return res, errors.New("a commit message is required (-m MESSAGE)")
	}
	if err := Check(ctx, opt.Card, opt.Want...); err != nil {
		return res, err
	}
	before, err := Inspect(opt.Card)
	if err != nil {
		return res, err
	}
	gitDir, err := GitDir(opt.Card)
	if err != nil {
		return res, err
	}
	if !isRepo(gitDir) {
		return res, fmt.Errorf("card %s is not a git repository yet (its .git is empty: stem made it so the container cannot make one): run `git init` in %s on the host, then commit again", opt.Card, opt.Card)
	}
	env := opt.Env
	if env == nil {
		env = os.Environ()
	}
	r := newRunner(opt.Git, opt.Card, gitDir, env)
	cfg, err := r.config(ctx)
	if err != nil {
		return res, err
	}
	if err := r.checkOrigins(cfg); err != nil {
		return res, err
	}
	r.overrides = append(r.overrides, driverOverrides(cfg)...)
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	if err := r.run(ctx, out, "add", "--all"); err != nil {
		return res, err
	}
	// stem's own state is never committed (an exclude pathspec makes
	// add fail when .gitignore lists these already).
	if err := r.run(ctx, out, "reset", "-q", "--", ".stem", ".rv"); err != nil {
		return res, err
	}
	// diff --quiet exits 1 when something is staged, 0 when nothing is.
	err = r.command(ctx, "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv").Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return res, ErrNothing
	case !errors.As(err, &ee) || ee.ExitCode() != 1:
		return res, fmt.Errorf("git diff --cached: %w", err)
	}
	if err := r.run(ctx, out, "commit", "--no-verify", "--no-edit", "--cleanup=strip", "-m", opt.Message); err != nil {
		return res, err
	}
	id, err := r.output(ctx, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return res, err
	}
	res.Commit = strings.TrimSpace(string(id))
	// The .git cannot change under a read-only mount; a host-side change
	// during the commit is still reported.
	if after, err := Inspect(opt.Card); err != nil || !after.Same(before) {
		return res, fmt.Errorf("card %s: .git changed while committing (%v): check it before using git there", opt.Card, err)
	}
	return res, nil
}

// isRepo: the git directory has a HEAD (an empty .git is not a repository).
func isRepo(gitDir string) bool {
	data, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	return err == nil && len(bytes.TrimSpace(data)) > 0
}
