package cardgit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// Limits bound what Commit reads from a card: the container chooses the
// card's content, and a sparse file, a huge tree or a file that keeps
// growing must end in a clear refusal, not in hours of hashing.
type Limits struct {
	Files    int   // files and symlinks staged
	FileSize int64 // one file's size (by fstat, before any read)
	Bytes    int64 // all staged files together
}

// DefaultLimits are generous for a worksheet's sources.
var DefaultLimits = Limits{Files: 20_000, FileSize: 100 << 20, Bytes: 1 << 30}

// ErrLimit is returned (wrapped) when a card passes one of its Limits.
var ErrLimit = errors.New("over stem's commit limit")

// ErrSpecial is returned (wrapped) for a FIFO, socket or device node that
// would be staged.
var ErrSpecial = errors.New("not a regular file, directory or symlink")

// seen is one non-directory entry the walk listed, by its slash-separated
// path relative to the card root.
type seen struct {
	rel string
	typ uint8 // DT_REG, DT_LNK, or another d_type (refused if staged)
}

// listing is what walkCard found: every non-directory entry outside the
// card's .git, .stem/ and .rv/, and the content of each .gitignore (read
// through the same descriptors), which decides what is left out.
type listing struct {
	entries []seen
	ignores map[string][]byte // rel of each .gitignore -> its content
}

// maxIgnoreFile bounds one .gitignore copied for git to read.
const maxIgnoreFile = 1 << 20

// walkCard lists card relative to directory descriptors, nothing
// followed: a directory is entered only through openat(O_NOFOLLOW|
// O_DIRECTORY) on the descriptor of the one above, so a directory the
// container swaps for a symlink meanwhile fails to open (and is left out)
// instead of leading out of the card. A .git entry below the root, or a
// directory holding HEAD, refs and objects, is refused: git would take
// either for a repository. limit bounds the entries listed.
func walkCard(ctx context.Context, card string, limit int) (*listing, error) {
	stack, err := openCard(card)
	if err != nil {
		return nil, fmt.Errorf("read card %s: %w", card, err)
	}
	defer stack.close()
	l := &listing{ignores: map[string][]byte{}}
	count := 0
	buf := make([]byte, 32<<10)
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read card %s: %w", card, err)
		}
		d := stack.pop()
		ents, err := readDir(d.fd, buf)
		if err != nil {
			unix.Close(d.fd)
			return nil, fmt.Errorf("read card %s: list %s: %w", card, Show(orDot(d.rel)), err)
		}
		count += len(ents)
		if count > limit {
			unix.Close(d.fd)
			return nil, fmt.Errorf("card %s: %w: more than %d entries: keep large generated trees out of the card", card, ErrLimit, limit)
		}
		var head, refs, objects bool
		for _, e := range ents {
			rel := path.Join(d.rel, e.name)
			switch e.name {
			case "HEAD":
				head = true
			case "refs":
				refs = true
			case "objects", "commondir":
				objects = true
			}
			if d.rel == "" && (e.name == ".git" || e.name == ".stem" || e.name == ".rv") {
				continue // the card's own git, and stem's state: never staged
			}
			if e.name == ".git" {
				return nil, &Error{Card: card, Problems: []Problem{{Path: path.Join(card, rel), What: "a .git " + typeName(e.typ) + " (a nested repository)", Nested: true}}}
			}
			typ := e.typeIn(d.fd)
			if typ != unix.DT_DIR {
				l.entries = append(l.entries, seen{rel, typ})
				if e.name == ".gitignore" && typ == unix.DT_REG {
					if data, err := readAt(d.fd, e.name, maxIgnoreFile); err == nil {
						l.ignores[rel] = data
					}
				}
				continue
			}
			stack.enter(d, e.name, rel)
		}
		if head && refs && objects {
			unix.Close(d.fd)
			return nil, &Error{Card: card, Problems: []Problem{{Path: path.Join(card, d.rel), What: "a bare repository (HEAD, refs and objects) (a nested repository)", Nested: true}}}
		}
		unix.Close(d.fd)
	}
	sort.Slice(l.entries, func(i, j int) bool { return l.entries[i].rel < l.entries[j].rel })
	return l, nil
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// readAt reads the regular file name in the directory dfd, nothing
// followed, at most limit bytes.
func readAt(dfd int, name string, limit int64) ([]byte, error) {
	fd, err := openNoFollow(dfd, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, ErrSpecial
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrLimit, st.Size, limit)
	}
	return readFull(fd, st.Size)
}

// openNoFollow opens name in dfd as an O_PATH descriptor (no open of a
// device or FIFO happens) and, only when fstat on that descriptor says it
// is a regular file, reopens that same inode for reading through
// /proc/self/fd: what is read is the file the type was checked on, even
// if the name is swapped meanwhile. A symlink fails with ELOOP.
func openNoFollow(dfd int, name string) (int, error) {
	pfd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return -1, unix.ELOOP
	default:
		return -1, fmt.Errorf("%w (%s)", ErrSpecial, modeKind(st.Mode))
	}
	return unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
}

// readFull reads exactly size bytes from fd: a file that shrank while it
// was read is an error (the container changed it; commit again).
func readFull(fd int, size int64) ([]byte, error) {
	data := make([]byte, size)
	for off := int64(0); off < size; {
		n, err := unix.Pread(fd, data[off:], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("file shrank from %d to %d bytes while stem read it", size, off)
		}
		off += int64(n)
	}
	return data, nil
}

// modeKind names a file type from st_mode for a message.
func modeKind(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device node"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "a special file"
}
