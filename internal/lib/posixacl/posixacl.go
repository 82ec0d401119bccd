// Package posixacl reads and writes POSIX access control lists (the
// system.posix_acl_access and system.posix_acl_default extended
// attributes, in the kernel's binary format) on open file descriptors.
//
// stem runs each container in a user namespace whose root is a host uid
// other than the student's, and gives that uid the card through ACLs
// (internal/cardaccess). Everything here works on descriptors opened
// without following symlinks, never on a path the container could swap.
package posixacl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// Tags of ACL entries (linux/posix_acl.h).
const (
	UserObj  uint16 = 0x01
	User     uint16 = 0x02
	GroupObj uint16 = 0x04
	Group    uint16 = 0x08
	Mask     uint16 = 0x10
	Other    uint16 = 0x20
)

// Permission bits of an entry.
const (
	Read  uint16 = 4
	Write uint16 = 2
	Exec  uint16 = 1
	RWX          = Read | Write | Exec
)

const (
	xattrAccess  = "system.posix_acl_access"
	xattrDefault = "system.posix_acl_default"
	version      = 2
	noID         = ^uint32(0)
)

// Entry is one line of an ACL. ID is meaningful for User and Group only.
type Entry struct {
	Tag  uint16
	Perm uint16
	ID   uint32
}

// ACL is a list of entries; an empty ACL means none is set (the mode
// bits alone decide).
type ACL []Entry

// FromMode is the minimal ACL equal to the permission bits of mode.
func FromMode(mode uint32) ACL {
	return ACL{
		{Tag: UserObj, Perm: uint16(mode>>6) & 7, ID: noID},
		{Tag: GroupObj, Perm: uint16(mode>>3) & 7, ID: noID},
		{Tag: Other, Perm: uint16(mode) & 7, ID: noID},
	}
}

// Get returns fd's access ACL (def false) or default ACL (def true); an
// ACL that is not set is empty, not an error. fd may be an O_PATH
// descriptor.
func Get(fd int, def bool) (ACL, error) {
	buf := make([]byte, 256)
	for {
		n, err := getxattr(fd, name(def), buf)
		if errors.Is(err, unix.ENODATA) {
			return nil, nil
		}
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<16 {
			buf = make([]byte, 4*len(buf))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name(def), err)
		}
		return decode(buf[:n])
	}
}

// GetPath returns the access ACL of path itself (a symlink's is none).
func GetPath(path string) (ACL, error) {
	buf := make([]byte, 1024)
	n, err := unix.Lgetxattr(path, xattrAccess, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", xattrAccess, path, err)
	}
	return decode(buf[:n])
}

// Set writes acl as fd's access or default ACL. For the access ACL the
// kernel also sets the mode's permission bits (the group bits become the
// mask).
func Set(fd int, def bool, acl ACL) error {
	if err := setxattr(fd, name(def), acl.encode()); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("write %s: the file system does not support POSIX ACLs (mount it with the acl option): %w", name(def), err)
		}
		return fmt.Errorf("write %s: %w", name(def), err)
	}
	return nil
}

// getxattr and setxattr act on fd itself; an O_PATH descriptor, which
// the f* calls refuse (EBADF), through /proc/self/fd/N, which names its
// inode whatever happens to its path.
func getxattr(fd int, attr string, buf []byte) (int, error) {
	n, err := unix.Fgetxattr(fd, attr, buf)
	if errors.Is(err, unix.EBADF) {
		n, err = unix.Getxattr(procPath(fd), attr, buf)
	}
	return n, err
}

func setxattr(fd int, attr string, data []byte) error {
	err := unix.Fsetxattr(fd, attr, data, 0)
	if errors.Is(err, unix.EBADF) {
		err = unix.Setxattr(procPath(fd), attr, data, 0)
	}
	return err
}

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

func name(def bool) string {
	if def {
		return xattrDefault
	}
	return xattrAccess
}

func decode(b []byte) (ACL, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != version {
		return nil, fmt.Errorf("malformed ACL (%d bytes)", len(b))
	}
	var acl ACL
	for p := 4; p < len(b); p += 8 {
		acl = append(acl, Entry{
			Tag:  binary.LittleEndian.Uint16(b[p:]),
			Perm: binary.LittleEndian.Uint16(b[p+2:]),
			ID:   binary.LittleEndian.Uint32(b[p+4:]),
		})
	}
	return acl, nil
}

func (a ACL) encode() []byte {
	s := append(ACL(nil), a...)
	// The kernel wants entries ordered by tag, then id.
	sort.Slice(s, func(i, j int) bool {
		if s[i].Tag != s[j].Tag {
			return s[i].Tag < s[j].Tag
		}
		return s[i].ID < s[j].ID
	})
	b := make([]byte, 4, 4+8*len(s))
	binary.LittleEndian.PutUint32(b, version)
	for _, e := range s {
		if e.Tag != User && e.Tag != Group {
			e.ID = noID
		}
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, e.ID)
	}
	return b
}

// Find returns the entry with tag (and id, for User and Group).
func (a ACL) Find(tag uint16, id uint32) (Entry, bool) {
	for _, e := range a {
		if e.Tag == tag && (tag != User && tag != Group || e.ID == id) {
			return e, true
		}
	}
	return Entry{}, false
}

// With returns a copy of a with the named user uid given perm (replacing
// an entry for uid) and the mask recomputed as the union of the group
// class, as setfacl -m does.
func (a ACL) With(uid uint32, perm uint16) ACL {
	out := make(ACL, 0, len(a)+2)
	for _, e := range a {
		if e.Tag == Mask || e.Tag == User && e.ID == uid {
			continue
		}
		out = append(out, e)
	}
	out = append(out, Entry{Tag: User, Perm: perm, ID: uid})
	var mask uint16
	for _, e := range out {
		if e.Tag == User || e.Tag == Group || e.Tag == GroupObj {
			mask |= e.Perm
		}
	}
	return append(out, Entry{Tag: Mask, Perm: mask, ID: noID})
}

// Effective is what the named user uid may do: its entry limited by the
// mask (0 when it has no entry).
func (a ACL) Effective(uid uint32) uint16 {
	e, ok := a.Find(User, uid)
	if !ok {
		return 0
	}
	if m, ok := a.Find(Mask, 0); ok {
		return e.Perm & m.Perm
	}
	return e.Perm
}

// Named returns the uids of a's named user entries.
func (a ACL) Named() []uint32 {
	var ids []uint32
	for _, e := range a {
		if e.Tag == User {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// HasNamedGroups reports whether a names any group.
func (a ACL) HasNamedGroups() bool {
	for _, e := range a {
		if e.Tag == Group {
			return true
		}
	}
	return false
}
