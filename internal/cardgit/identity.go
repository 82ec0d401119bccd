package cardgit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/beneath"
)

// Kinds of .git an Identity records.
const (
	KindDir  = "dir"  // a git directory (or the empty one stem made)
	KindFile = "file" // a "gitdir: PATH" file (a linked worktree), PATH outside the card
)

// Identity names one .git: what it is and which inode. The registry keeps
// the Identity an instance was created with, so a .git replaced later is
// told apart from the one the container got read-only.
type Identity struct {
	Kind string `json:"kind"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// Same reports whether id and o are the same file.
func (id Identity) Same(o Identity) bool {
	return id.Kind == o.Kind && id.Dev == o.Dev && id.Ino == o.Ino
}

func (id Identity) String() string {
	return fmt.Sprintf("%s %d:%d inode %d", id.Kind, unix.Major(id.Dev), unix.Minor(id.Dev), id.Ino)
}

// Path is card's .git.
func Path(card string) string { return filepath.Join(card, ".git") }

// gitdirLimit bounds a .git file: one line with a path.
const gitdirLimit = 4096

// Prepare returns the Identity of card's .git, to be bind-mounted
// read-only at its own path. A card that is not a repository gets an
// empty .git directory first: without it the container could create one,
// and git on the host would use it in the card. A .git file must name a
// git directory outside the card (which the container cannot reach); a
// symlink or anything else is refused.
func Prepare(card string) (Identity, error) {
	id, err := Inspect(card)
	if errors.Is(err, os.ErrNotExist) {
		// Below the card with nothing followed, like every host-side
		// write there; an existing name (made meanwhile) is inspected.
		if err := beneath.Mkdir(card, ".git", 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return Identity{}, fmt.Errorf("card %s is not a git repository, and making an empty .git for it failed: %w", card, err)
		}
		id, err = Inspect(card)
	}
	if err != nil {
		return Identity{}, err
	}
	if id.Kind == KindFile {
		if _, err := GitDir(card); err != nil {
			return Identity{}, err
		}
	}
	return id, nil
}

// Inspect describes card's .git now, following nothing. A missing .git
// wraps os.ErrNotExist; a symlink or a special file is an error that says
// what to do.
func Inspect(card string) (Identity, error) {
	fi, err := beneath.Lstat(card, ".git")
	if err != nil {
		return Identity{}, fmt.Errorf("card %s: %w", card, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Identity{}, fmt.Errorf("card %s: cannot stat .git", card)
	}
	switch {
	case fi.IsDir():
		return Identity{Kind: KindDir, Dev: uint64(st.Dev), Ino: st.Ino}, nil
	case fi.Mode().IsRegular():
		return Identity{Kind: KindFile, Dev: uint64(st.Dev), Ino: st.Ino}, nil
	}
	return Identity{}, fmt.Errorf("card %s: .git is %s; stem needs a directory (or a gitdir: file naming one outside the card): replace it with the repository itself (mv the directory it points to into its place)", card, beneath.Kind(fi.Mode()))
}

// GitDir is the git directory card's .git stands for: card/.git itself,
// or the directory its "gitdir:" line names, which must lie outside the
// card (the container can write everything inside it).
func GitDir(card string) (string, error) {
	id, err := Inspect(card)
	if err != nil {
		return "", err
	}
	if id.Kind == KindDir {
		return Path(card), nil
	}
	data, err := beneath.ReadFile(card, ".git", gitdirLimit)
	if err != nil {
		return "", fmt.Errorf("card %s: read .git: %w", card, err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir: ")
	if !ok || dir == "" || strings.ContainsRune(dir, 0) {
		return "", fmt.Errorf("card %s: .git is a file but not a \"gitdir: PATH\" line", card)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(card, dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("card %s: .git names %s: %w", card, dir, err)
	}
	realCard, err := filepath.EvalSymlinks(card)
	if err != nil {
		return "", fmt.Errorf("card %s: %w", card, err)
	}
	if within(realCard, real) {
		return "", fmt.Errorf("card %s: .git names %s, inside the card, where the container can write; move that git directory out of the card and point .git at it", card, real)
	}
	return real, nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

func mountedIn(root, card string, want Identity) error {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("check the container's .git: open its root: %w", err)
	}
	for _, part := range strings.Split(strings.Trim(filepath.Clean(card), "/"), "/") {
		next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("check the container's .git: %s in the container: %w", card, err)
		}
		fd = next
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("check the container's .git: %w", err)
	}
	kind := "other"
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		kind = KindDir
	case unix.S_IFREG:
		kind = KindFile
	}
	got := Identity{Kind: kind, Dev: st.Dev, Ino: st.Ino}
	if !got.Same(want) {
		return fmt.Errorf("the container has another .git at %s (%s) than the card's (%s)", Path(card), got, want)
	}
	return nil
}
