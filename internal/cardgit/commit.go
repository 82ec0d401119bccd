package cardgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	// Out receives a summary of the commit.
	Out io.Writer
	// Limits bound the commit (zero: DefaultLimits).
	Limits Limits
}

// CommitResult says what Commit did.
type CommitResult struct {
	// Commit is the new commit's id; empty when there was nothing to commit.
	Commit string `json:"commit,omitempty"`
	Card   string `json:"card"`
}

// ErrNothing is returned when the card has no changes to commit.
var ErrNothing = errors.New("nothing to commit")

// Commit stages every change in the card's work tree as `git add --all`
// would (except stem's own .stem/ and .rv/ state) and commits it, with git
// on the host pinned to the card's .git and reading nothing the container
// wrote: see the package doc. stem reads the card itself (commitStaged);
// git never opens a path in the work tree. It refuses a card Check finds
// unsafe, a card whose .git is not yet a repository, configuration
// included from the work tree, and a card past opt.Limits.
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
	lim := opt.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	id, err := commitStaged(ctx, r, opt, lim, out)
	if err != nil {
		return res, err
	}
	res.Commit = id
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
