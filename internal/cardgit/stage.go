package cardgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/beneath"
)

// entry is one index entry: mode, object id, path.
type entry struct{ mode, id string }

// staged is what stage put in the new index, by path.
type staged map[string]entry

// stager stages a card into a private index and objects into a
// quarantine: git is run with a shadow work tree (a private directory
// holding only copies of the card's .gitignore files), so no git process
// is given a path into the card but its .git.
type stager struct {
	r       *runner // work tree: the shadow
	card    string
	lim     Limits
	q       *quarantine
	index   string // GIT_INDEX_FILE of the new index
	known   map[string]bool
	tracked map[string]entry // the real index
	head    map[string]entry // HEAD's tree
	total   int64
}

// stage lists the card, decides what `git add --all` would stage, reads
// each such file or symlink through descriptors with nothing followed,
// writes new blobs to the quarantine and builds the new index. It returns
// what it staged.
func (s *stager) stage(ctx context.Context, shadow string) (staged, error) {
	l, err := walkCard(ctx, s.card, maxEntries)
	if err != nil {
		return nil, err
	}
	for rel, data := range l.ignores {
		p := filepath.Join(shadow, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return nil, err
		}
	}
	hook("listed")
	ignored, err := s.ignored(ctx, l.entries)
	if err != nil {
		return nil, err
	}
	out := staged{}
	// .stem/ and .rv/ stay as HEAD has them: stem's state is never staged.
	for p, e := range s.head {
		if isStemState(p) {
			out[p] = e
		}
	}
	var dir *os.File
	dirRel := "\x00"
	defer func() {
		if dir != nil {
			dir.Close()
		}
	}()
	for _, e := range l.entries {
		if ignored[e.rel] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("commit of %s stopped: %w", s.card, err)
		}
		if len(out) >= s.lim.Files {
			return nil, fmt.Errorf("card %s: %w: more than %d files to commit: keep generated files out of the card or list them in .gitignore", s.card, ErrLimit, s.lim.Files)
		}
		parent, name := path.Split(e.rel)
		parent = strings.TrimSuffix(parent, "/")
		if parent != dirRel {
			if dir != nil {
				dir.Close()
				dir = nil
			}
			dir, err = openParent(s.card, parent)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("card %s: %s changed while stem read it (%v): commit again", s.card, Show(orDot(parent)), err)
			}
			dirRel = parent
		}
		if dir == nil {
			continue // its directory was removed or renamed meanwhile
		}
		ent, err := s.read(int(dir.Fd()), e.rel, name)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile: not in the card now
		}
		if err != nil {
			return nil, err
		}
		out[e.rel] = ent
	}
	var info bytes.Buffer
	for p, e := range out {
		fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.id, p)
	}
	if _, err := s.r.with(s.env()...).outputIn(ctx, info.Bytes(), "update-index", "-z", "--index-info"); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *stager) env() []string { return append(s.q.env(), "GIT_INDEX_FILE="+s.index) }

func isStemState(p string) bool {
	return p == ".stem" || p == ".rv" || strings.HasPrefix(p, ".stem/") || strings.HasPrefix(p, ".rv/")
}

// openParent opens the card's directory rel ("" for the root) with
// nothing followed on the way.
func openParent(card, rel string) (*os.File, error) {
	if rel == "" {
		fd, err := unix.Open(card, dirFlags&^unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), card), nil
	}
	return beneath.OpenDir(card, rel)
}

// read stages name in the directory dfd: a regular file as a blob of its
// content, a symlink as a blob of its link text; anything else is refused.
func (s *stager) read(dfd int, rel, name string) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return entry{}, os.ErrNotExist
		}
		return entry{}, fmt.Errorf("card %s: %s: %w", s.card, Show(rel), err)
	}
	var data []byte
	var mode string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return entry{}, fmt.Errorf("card %s: %s changed while stem read it (%v): commit again", s.card, Show(rel), err)
		}
		data, mode = buf[:n], "120000"
	case unix.S_IFREG:
		if err := s.bound(rel, st.Size); err != nil {
			return entry{}, err
		}
		fd, err := openNoFollow(dfd, name)
		if err != nil {
			return entry{}, fmt.Errorf("card %s: %s changed while stem read it (%v): commit again", s.card, Show(rel), err)
		}
		var fst unix.Stat_t
		err = unix.Fstat(fd, &fst)
		if err == nil {
			// The inode opened, which may not be the one stat saw.
			if err = s.bound(rel, fst.Size); err == nil {
				data, err = readFull(fd, fst.Size)
			}
		}
		unix.Close(fd)
		if err != nil {
			return entry{}, fmt.Errorf("card %s: %s: %w", s.card, Show(rel), err)
		}
		s.total += int64(len(data))
		mode = "100644"
		if fst.Mode&0o100 != 0 {
			mode = "100755"
		}
	case unix.S_IFDIR:
		return entry{}, fmt.Errorf("card %s: %s changed while stem read it (a directory now): commit again", s.card, Show(rel))
	default:
		return entry{}, fmt.Errorf("card %s: %s is %s: %w; git would block on it or read a device of the host: remove it (from inside the container if rm is refused) or list it in .gitignore", s.card, Show(rel), modeKind(st.Mode), ErrSpecial)
	}
	id := s.q.blobID(data)
	if !s.known[id] {
		if err := s.q.writeBlob(id, data); err != nil {
			return entry{}, err
		}
		s.known[id] = true
	}
	return entry{mode, id}, nil
}

// bound refuses a file of size that would pass a limit, before any read.
func (s *stager) bound(rel string, size int64) error {
	if size > s.lim.FileSize {
		return fmt.Errorf("card %s: %s: %w: %d bytes, more than %d for one file: keep it out of the card or list it in .gitignore", s.card, Show(rel), ErrLimit, size, s.lim.FileSize)
	}
	if s.total+size > s.lim.Bytes {
		return fmt.Errorf("card %s: %s: %w: the files to commit pass %d bytes together: keep large files out of the card or list them in .gitignore", s.card, Show(rel), ErrLimit, s.lim.Bytes)
	}
	return nil
}

// ignored asks git which untracked entries .gitignore leaves out. git
// reads the patterns from the shadow work tree (copies stem read), from
// the git directory and the student's configuration: never from the card.
func (s *stager) ignored(ctx context.Context, es []seen) (map[string]bool, error) {
	var in bytes.Buffer
	for _, e := range es {
		if _, ok := s.tracked[e.rel]; !ok {
			in.WriteString(e.rel)
			in.WriteByte(0)
		}
	}
	out := map[string]bool{}
	if in.Len() == 0 {
		return out, nil
	}
	res, err := s.r.outputIn(ctx, in.Bytes(), "check-ignore", "-z", "--stdin")
	if err != nil && !isExit(err, 1) {
		return nil, err
	}
	for _, p := range bytes.Split(res, []byte{0}) {
		if len(p) > 0 {
			out[string(p)] = true
		}
	}
	return out, nil
}

// lsEntries parses `git ls-files -s -z` or `git ls-tree -r -z` output.
func lsEntries(out []byte, tree bool) (map[string]entry, error) {
	m := map[string]entry{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("git: unexpected listing %q", rec)
		}
		id := f[1]
		if tree {
			id = f[2]
		}
		m[string(p)] = entry{f[0], id}
	}
	return m, nil
}

// verify checks the tree git wrote against what stage staged: the same
// paths, each with the mode and id stem computed, and no gitlink.
func (s *stager) verify(ctx context.Context, tree string, want staged) error {
	out, err := s.r.with(s.q.env()...).output(ctx, "ls-tree", "-r", "-z", "--full-tree", tree)
	if err != nil {
		return err
	}
	got, err := lsEntries(out, true)
	if err != nil {
		return err
	}
	for p, e := range got {
		if e.mode == "160000" {
			return fmt.Errorf("card %s: the staged tree holds a gitlink at %s: nothing was committed", s.card, Show(p))
		}
		if w, ok := want[p]; !ok || w != e {
			return fmt.Errorf("card %s: the staged tree holds %s %s %s, which stem did not read there: nothing was committed", s.card, e.mode, e.id, Show(p))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("card %s: the staged tree has %d entries, stem read %d: nothing was committed", s.card, len(got), len(want))
	}
	return nil
}

// cleanMessage is `git commit --cleanup=strip`: comment lines and
// trailing spaces gone, runs of blank lines one, none at either end.
func cleanMessage(msg string) string {
	var lines []string
	blank := false
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			blank = len(lines) > 0
			continue
		}
		if blank {
			lines = append(lines, "")
			blank = false
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
