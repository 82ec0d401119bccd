// Package cardaccess gives a task container's root, a host uid of its own
// (internal/idmap), the student's card and socket directory through POSIX
// ACLs, and gives the student what the container makes there.
//
// Every file and directory of the card that the caller owns gets a named
// user entry for the container (read and write; execute where the owner
// has it; only read in .git, which the container sees read-only), and
// every such directory a default ACL naming the container and the student,
// so what either makes later is the other's too (within the mask: a file
// made with mode 0644 gives the group class, hence both, read only).
//
// The container runs while this walks (another instance of the same card),
// so nothing is looked up by path below the card: each directory is
// opened relative to its parent without following symlinks, each ACL is
// written through the descriptor (internal/lib/posixacl). Symlinks, sockets,
// devices and FIFOs are left alone, and so are other file systems mounted
// below the card.
package cardaccess

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/posixacl"
)

// Grant names the two parties.
type Grant struct {
	// Container is the container root's host uid.
	Container uint32
	// Student is the caller's uid, named in default ACLs so that it can
	// change what the container makes; 0 (root needs no entry) leaves it
	// out.
	Student uint32
}

// Stats says what a walk did.
type Stats struct {
	Visited, Changed, Skipped int
}

// Card walks the card rooted at dir. It stops at the first error it
// cannot attribute to one file.
func Card(dir string, g Grant) (Stats, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("open the card %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return Stats{}, fmt.Errorf("stat the card %s: %w", dir, err)
	}
	w := &walker{g: g, dev: st.Dev, euid: uint32(os.Geteuid())}
	err = w.dir(fd, &st, dir, false, 0)
	return w.stats, err
}

// maxDepth bounds recursion (a card is a few levels deep).
const maxDepth = 64

type walker struct {
	g     Grant
	dev   uint64
	euid  uint32
	stats Stats
}

// notFollowed are the kinds of entry the walk leaves alone.
const notFollowed = fs.ModeSymlink | fs.ModeDevice | fs.ModeCharDevice | fs.ModeNamedPipe | fs.ModeSocket | fs.ModeIrregular

// dir grants on the directory fd (which it closes; st is its stat) and
// everything in it. Entries are opened read-only (regular files and
// directories only, by the type the directory lists, never following a
// symlink and without blocking), and checked again by fstat.
func (w *walker) dir(fd int, st *unix.Stat_t, path string, readOnly bool, depth int) error {
	defer unix.Close(fd)
	if err := w.apply(fd, path, st, readOnly, true); err != nil {
		return err
	}
	if depth >= maxDepth {
		return nil
	}
	ents, err := readDir(fd)
	if err != nil {
		return fmt.Errorf("list %s: %w", path, err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.Type()&notFollowed != 0 {
			w.stats.Skipped++
			continue
		}
		child := path + "/" + name
		ro := readOnly || depth == 0 && name == ".git"
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
		if e.IsDir() {
			flags |= unix.O_DIRECTORY
		}
		cfd, err := unix.Openat(fd, name, flags, 0)
		if errors.Is(err, unix.EACCES) && !e.IsDir() {
			// A file its owner cannot read: its ACL is still the owner's.
			cfd, err = unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			continue // removed or swapped meanwhile: not ours to follow
		case errors.Is(err, unix.EACCES):
			w.stats.Skipped++ // a directory we cannot read is not ours
			continue
		case err != nil:
			return fmt.Errorf("open %s: %w", child, err)
		}
		var cst unix.Stat_t
		if err := unix.Fstat(cfd, &cst); err != nil {
			unix.Close(cfd)
			return fmt.Errorf("stat %s: %w", child, err)
		}
		switch {
		case cst.Dev != w.dev:
			unix.Close(cfd)
			w.stats.Skipped++
		case cst.Mode&unix.S_IFMT == unix.S_IFDIR:
			if err := w.dir(cfd, &cst, child, ro, depth+1); err != nil {
				return err
			}
		case cst.Mode&unix.S_IFMT == unix.S_IFREG:
			err := w.apply(cfd, child, &cst, ro, false)
			unix.Close(cfd)
			if err != nil {
				return err
			}
		default:
			unix.Close(cfd)
			w.stats.Skipped++
		}
	}
	return nil
}

func readDir(fd int) ([]fs.DirEntry, error) {
	// A second descriptor: os.File takes ownership of the one it wraps.
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	return f.ReadDir(-1)
}

// apply gives the container its entry on one file or directory the
// caller owns (root: any not the container's), and a directory its
// default ACL.
func (w *walker) apply(fd int, path string, st *unix.Stat_t, readOnly, isDir bool) error {
	w.stats.Visited++
	if st.Uid != w.euid && (w.euid != 0 || st.Uid == w.g.Container) {
		w.stats.Skipped++
		return nil
	}
	want := posixacl.Read | posixacl.Write
	if readOnly {
		want = posixacl.Read
	}
	if isDir || st.Mode&unix.S_IXUSR != 0 {
		want |= posixacl.Exec
	}
	changed := false
	acl, err := posixacl.Get(fd, false)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if acl.Effective(w.g.Container)&want != want {
		if acl == nil {
			acl = posixacl.FromMode(st.Mode)
		}
		if err := posixacl.Set(fd, false, acl.With(w.g.Container, want)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		changed = true
	}
	if isDir {
		c, err := w.defaults(fd, path, st, want)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if changed {
		w.stats.Changed++
	}
	return nil
}

// defaults gives a directory the default ACL that new files inherit.
func (w *walker) defaults(fd int, path string, st *unix.Stat_t, want uint16) (bool, error) {
	def, err := posixacl.Get(fd, true)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	ok := def.Effective(w.g.Container)&want == want
	if w.g.Student != 0 {
		ok = ok && def.Effective(w.g.Student) == posixacl.RWX
	}
	if ok {
		return false, nil
	}
	if def == nil {
		def = posixacl.FromMode(st.Mode)
		def[0].Perm = posixacl.RWX
	}
	def = def.With(w.g.Container, want)
	if w.g.Student != 0 {
		def = def.With(w.g.Student, posixacl.RWX)
	}
	if err := posixacl.Set(fd, true, def); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// SocketDir gives the container its socket directory (dir, which the
// caller made, 0700): the container makes its sockets there, and the
// default ACL lets the student connect to them and read what the container
// writes. The owning group and others keep nothing.
func SocketDir(dir string, g Grant) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	acl := posixacl.FromMode(0o700).With(g.Container, posixacl.RWX)
	if err := posixacl.Set(fd, false, acl); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if g.Student != 0 {
		acl = acl.With(g.Student, posixacl.RWX)
	}
	if err := posixacl.Set(fd, true, acl); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// Traverse lets the container pass through dir (0700, the caller's) to
// the directory below it that SocketDir opened, and nothing else: it can
// neither list nor change dir.
func Traverse(dir string, g Grant) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	acl, err := posixacl.Get(fd, false)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if acl.Effective(g.Container)&posixacl.Exec != 0 {
		return nil
	}
	if acl == nil {
		acl = posixacl.FromMode(0o700)
	}
	if err := posixacl.Set(fd, false, acl.With(g.Container, posixacl.Exec)); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// Device lets the container open the device node path (root's: rootful).
func Device(path string, g Grant) error {
	return grantNode(path, unix.S_IFCHR, "a character device", g.Container)
}

// Socket lets uid connect to the socket at path (the caller's, in a
// directory of its own).
func Socket(path string, uid uint32) error {
	return grantNode(path, unix.S_IFSOCK, "a socket", uid)
}

// grantNode gives uid read and write on path, which must be of type kind
// (a symlink is not followed), unless it has them already.
func grantNode(path string, kind uint32, what string, uid uint32) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != kind {
		return fmt.Errorf("%s is not %s", path, what)
	}
	acl, err := posixacl.Get(fd, false)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	want := posixacl.Read | posixacl.Write
	if acl.Effective(uid)&want == want {
		return nil
	}
	if acl == nil {
		acl = posixacl.FromMode(st.Mode)
	}
	if err := posixacl.Set(fd, false, acl.With(uid, want)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
