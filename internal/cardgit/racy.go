package cardgit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Racy lists what in card makes plain `git add` on the host racy while
// the container runs, because someone other than the student (the
// container's uid) made it: symlinks, and the pieces of a repository
// (.git, HEAD, refs, objects, commondir) each on its own. A symlink or a
// repository the container can swap in between git's listing and its
// read is how a host file or a gitlink reaches a commit made with plain
// git; stemctl commit is not affected (see the package doc). At most max
// paths are returned, and how many there are. The card's own .git and
// stem's .stem/ and .rv/ are not looked at.
func Racy(ctx context.Context, card string, max int) ([]Finding, int, error) {
	uid := uint32(os.Getuid())
	var out []Finding
	n := 0
	err := eachEntry(ctx, card, func(dfd int, rel, name string, typ uint8) {
		piece := name == ".git" || name == "HEAD" || name == "refs" || name == "objects" || name == "commondir"
		if typ != unix.DT_LNK && !piece {
			return
		}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Uid == uid {
			return
		}
		n++
		if len(out) < max {
			what := "a symlink the container made"
			if piece {
				what = fmt.Sprintf("a %s named %s that the container made (a piece of a repository)", typeName(typ), name)
			}
			out = append(out, Finding{Path: filepath.Join(card, rel), What: what})
		}
	})
	return out, n, err
}

// RacyNote is the sentence stemctl status shows for Racy's findings.
func RacyNote(fs []Finding, n int) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is %s", Show(f.Path), f.What)
	}
	if n > len(fs) {
		fmt.Fprintf(&b, "; and %d more", n-len(fs))
	}
	b.WriteString(". Plain git add (git commit -a, git stash) on the host is racy while the container runs: it could take a file from outside the card or a planted repository into the commit. Commit with stemctl commit, or stop the instance first (stemctl down INSTANCE).")
	return b.String()
}

// eachEntry calls f for every entry below card (below the root: not the
// root's .git, .stem and .rv), directories entered relative to the
// descriptor of the one above with nothing followed, up to maxEntries.
func eachEntry(ctx context.Context, card string, f func(dfd int, rel, name string, typ uint8)) error {
	stack, err := openCard(card)
	if err != nil {
		return fmt.Errorf("scan card %s: %w", card, err)
	}
	defer stack.close()
	count := 0
	buf := make([]byte, 32<<10)
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := stack.pop()
		ents, err := readDir(d.fd, buf)
		if err != nil {
			unix.Close(d.fd)
			continue
		}
		if count += len(ents); count > maxEntries {
			unix.Close(d.fd)
			return fmt.Errorf("scan card %s: %w (more than %d)", card, ErrTooLarge, maxEntries)
		}
		for _, e := range ents {
			if d.rel == "" && (e.name == ".git" || e.name == ".stem" || e.name == ".rv") {
				continue
			}
			typ := e.typeIn(d.fd)
			rel := filepath.Join(d.rel, e.name)
			f(d.fd, rel, e.name, typ)
			if typ == unix.DT_DIR {
				stack.enter(d, e.name, rel)
			}
		}
		unix.Close(d.fd)
	}
	return nil
}
