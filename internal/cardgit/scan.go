package cardgit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Finding is a repository inside the card other than the card's own.
type Finding struct {
	Path string `json:"path"` // absolute
	What string `json:"what"` // "a .git directory", "a bare repository", ...
}

// ErrTooLarge is returned (wrapped) when a card has more entries than
// Nested looks at.
var ErrTooLarge = errors.New("too many files to scan")

// maxEntries bounds a scan: a card is a worksheet's sources, and a tree
// this large is refused rather than walked on every effectful call.
const maxEntries = 200_000

// Nested finds every repository git could discover in card other than the
// card's own .git: a .git entry of any kind below the root (git uses a
// directory, follows a "gitdir:" file or a symlink), and any directory,
// the root included, that holds HEAD, refs and objects or commondir (git
// takes such a directory for a bare repository when it is the current
// directory or on the way up from it). It walks the tree relative to
// descriptors with nothing followed, so a directory swapped for a symlink
// meanwhile leads nowhere outside the card; the card's own .git is not
// entered. The container can create repositories again at any moment: a
// clean result holds only for the moment it was taken.
func Nested(ctx context.Context, card string) ([]Finding, error) {
	return nested(ctx, card, maxEntries)
}

func nested(ctx context.Context, card string, limit int) ([]Finding, error) {
	stack, err := openCard(card)
	if err != nil {
		return nil, fmt.Errorf("scan card %s: %w", card, err)
	}
	defer stack.close()
	var out []Finding
	entries := 0
	buf := make([]byte, 32<<10)
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		d := stack.pop()
		ents, err := readDir(d.fd, buf)
		if err != nil {
			unix.Close(d.fd)
			if d.rel == "" {
				return out, fmt.Errorf("scan card %s: %w", card, err)
			}
			continue // gone or swapped meanwhile
		}
		entries += len(ents)
		if entries > limit {
			unix.Close(d.fd)
			return out, fmt.Errorf("scan card %s: %w (more than %d): stem looks through the whole card for repositories code in the container could have made, so keep large generated trees out of the card", card, ErrTooLarge, limit)
		}
		var head, refs, objects bool
		for _, e := range ents {
			switch e.name {
			case "HEAD":
				head = true
			case "refs":
				refs = true
			case "objects", "commondir":
				objects = true
			}
			typ := e.typeIn(d.fd)
			if e.name == ".git" {
				if d.rel != "" {
					out = append(out, Finding{Path: filepath.Join(card, d.rel, e.name), What: "a .git " + typeName(typ)})
				}
				continue // neither the card's own nor a nested one is entered
			}
			if typ == unix.DT_DIR {
				stack.enter(d, e.name, filepath.Join(d.rel, e.name))
			}
		}
		if head && refs && objects {
			out = append(out, Finding{Path: filepath.Join(card, d.rel), What: "a bare repository (HEAD, refs and objects)"})
		}
		unix.Close(d.fd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

type dirent struct {
	name string
	typ  uint8
}

// readDir lists a directory descriptor's entries with their d_type,
// without the path-based lstat os.File.ReadDir falls back on.
func readDir(fd int, buf []byte) ([]dirent, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	var out []dirent
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{s, typ})
			}
			off += reclen
		}
	}
}

// typeAt is d_type from fstatat, for file systems that leave it unknown.
func typeAt(dfd int, name string) uint8 {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return unix.DT_UNKNOWN
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

func typeName(typ uint8) string {
	switch typ {
	case unix.DT_DIR:
		return "directory"
	case unix.DT_REG:
		return "file"
	case unix.DT_LNK:
		return "symlink"
	}
	return "entry"
}
