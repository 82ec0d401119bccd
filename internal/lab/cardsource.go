package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// scpLikeRE is git's user@host:path form of an SSH remote.
var scpLikeRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

// IsGitSource says whether a --cards value names a git repository (a URL,
// user@host:path, or a path ending in .git, each with an optional #REF)
// rather than a directory of cards.
func IsGitSource(src string) bool {
	u, _, _ := strings.Cut(src, "#")
	return strings.Contains(u, "://") || scpLikeRE.MatchString(u) || strings.HasSuffix(strings.TrimSuffix(u, "/"), ".git")
}

// cloneTimeout bounds one clone of the course's repository.
const cloneTimeout = 5 * time.Minute

// FetchCards makes a fresh shallow checkout of the course's repository
// src (URL or URL#REF, REF a branch or tag) under dir/cards and returns
// its path, which then serves as the cards directory. Each call clones
// again, so an update sees exactly the repository's state. Git runs
// with no system or global configuration, no hooks, no submodules and no
// ext:: transport: the repository is data, never code run as root.
func FetchCards(ctx context.Context, dir, src string) (string, error) {
	url, ref, _ := strings.Cut(src, "#")
	if url == "" || strings.HasPrefix(url, "-") {
		return "", fmt.Errorf("cards: %q is not a git repository address: give a URL (https://host/course.git), user@host:path or a path ending in .git", src)
	}
	if strings.HasPrefix(ref, "-") {
		return "", fmt.Errorf("cards: %q is not a branch or tag name", ref)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "", errors.New("cards from a git repository need git: apt-get install git")
	}
	sum := sha256.Sum256([]byte(src))
	base := filepath.Join(dir, "cards")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("cards: %w", err)
	}
	final := filepath.Join(base, hex.EncodeToString(sum[:6]))
	tmp, err := os.MkdirTemp(base, ".clone-")
	if err != nil {
		return "", fmt.Errorf("cards: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, cloneTimeout)
	defer cancel()
	args := []string{
		"-c", "core.hooksPath=/dev/null",
		"-c", "protocol.ext.allow=never",
		"-c", "core.fsmonitor=false",
		"-c", "credential.helper=",
		"clone", "--quiet", "--depth", "1", "--no-recurse-submodules", "--single-branch",
	}
	if ref != "" {
		args = append(args, "--branch", ref)
	}
	checkout := filepath.Join(tmp, "cards")
	args = append(args, "--", url, checkout)
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + tmp,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"LC_ALL=C",
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cards: git clone %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	if _, err := courseCards(checkout); err != nil {
		return "", fmt.Errorf("%w (in the repository %s)", err, src)
	}
	// The new checkout takes the old one's place; a run that fails before
	// here leaves the previous checkout as it was.
	old := filepath.Join(tmp, "old")
	if err := os.Rename(final, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cards: %w", err)
	}
	if err := os.Rename(checkout, final); err != nil {
		return "", fmt.Errorf("cards: %w", err)
	}
	return final, nil
}
