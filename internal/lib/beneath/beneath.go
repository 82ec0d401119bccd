// Package beneath opens files below a directory without following a
// symlink anywhere on the way.
//
// The card repository is bind-mounted writable into the task container, so
// code in the container can swap any directory of it for a symlink at any
// moment. A host-side reader that resolves a path and then opens it (even
// with O_NOFOLLOW, which guards only the last component) can be sent
// through a directory swapped in between, to any file of the host account.
// Here the path is resolved by the kernel relative to a descriptor of the
// root, in one step: openat2(2) with RESOLVE_BENEATH (no "..", no absolute
// path out of the root), RESOLVE_NO_SYMLINKS (no symlink in any
// component, the last included) and RESOLVE_NO_MAGICLINKS (/proc/self/fd
// and the like). Kernels without openat2 (before 5.6, or a seccomp filter
// that refuses it with ENOSYS) get the same rules from a walk that opens
// each directory with O_NOFOLLOW|O_DIRECTORY relative to the one before.
//
// Files are opened read-only with O_NONBLOCK (a FIFO or device would
// otherwise block the open; it is refused after) and O_NOCTTY, and must be
// regular files.
//
// The write side (MkdirAll, Mkdir, WriteFileAtomic, Remove, RemoveDir,
// Lstat) opens the parent directory the same way and then acts on one
// name relative to that descriptor (mkdirat, openat O_CREAT|O_EXCL|
// O_NOFOLLOW, renameat, unlinkat), so a directory swapped for a symlink
// can never make it create, replace or remove a file outside the root. A
// descriptor held while the container renames the directory stays on that
// directory, which a rename cannot take out of the mount it is in.
package beneath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrPath is returned (wrapped) for a path that is not a plain relative
// path below the root: absolute, empty, with "." or ".." components, or
// with a NUL byte.
var ErrPath = errors.New("not a relative path below the directory")

// ErrSymlink is returned (wrapped) when a component of the path is a
// symlink (or a magic link), including the last one.
var ErrSymlink = errors.New("a component of the path is a symlink")

// ErrNotRegular is returned (wrapped) when the file is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) by ReadFile for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// forceWalk makes Open use the fallback walk (tests).
var forceWalk bool

const openFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC | unix.O_NOFOLLOW

// Open opens the regular file rel below the directory root. rel is
// slash-separated and relative; root itself may be reached through
// symlinks (it is the caller's trusted path), nothing below it may.
func Open(root, rel string) (*os.File, error) {
	fd, err := openRel("open", root, rel, openFlags)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w (%s)", ErrNotRegular, Kind(fi.Mode()))}
	}
	return f, nil
}

// ReadFile reads the regular file rel below root, at most limit bytes
// (a larger file is refused with ErrTooLarge).
func ReadFile(root, rel string, limit int64) ([]byte, error) {
	f, err := Open(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: rel, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &os.PathError{Op: "read", Path: rel, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
	}
	return data, nil
}

// openRel opens rel below root with flags, nothing followed; errors are
// *os.PathError with op and stem's meanings (mapErr).
func openRel(op, root, rel string, flags int) (int, error) {
	if err := checkRel(rel); err != nil {
		return -1, &os.PathError{Op: op, Path: rel, Err: err}
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: op, Path: root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := openBeneath(rfd, rel, flags)
	if err != nil {
		return -1, &os.PathError{Op: op, Path: rel, Err: mapErr(err)}
	}
	return fd, nil
}

func checkRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.IndexByte(rel, 0) >= 0 {
		return ErrPath
	}
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return ErrPath
		}
	}
	return nil
}

// openBeneath opens rel below the directory rfd with flags (the last
// component; the directories on the way are only looked up).
func openBeneath(rfd int, rel string, flags int) (int, error) {
	if !forceWalk {
		// O_NOFOLLOW is the walk's: RESOLVE_NO_SYMLINKS refuses a symlink
		// at the end too (ELOOP), where O_NOFOLLOW|O_DIRECTORY would say
		// ENOTDIR.
		how := &unix.OpenHow{
			Flags:   uint64(flags &^ unix.O_NOFOLLOW),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for i := 0; ; i++ {
			fd, err := unix.Openat2(rfd, rel, how)
			// EAGAIN: a rename raced the lookup; EINTR: a signal.
			if (err == unix.EAGAIN || err == unix.EINTR) && i < 100 {
				continue
			}
			if err != unix.ENOSYS {
				return fd, err
			}
			break
		}
	}
	return walk(rfd, rel, flags)
}

// walk opens rel one component at a time: each directory with
// O_NOFOLLOW|O_DIRECTORY relative to the one before (a symlink fails with
// ENOTDIR), the last one with lastFlags, which hold O_NOFOLLOW (ELOOP).
// checkRel already refused "..", "." and absolute paths.
func walk(rfd int, rel string, lastFlags int) (int, error) {
	parts := strings.Split(rel, "/")
	dir := rfd
	closeDir := func() {
		if dir != rfd {
			unix.Close(dir)
		}
	}
	for i, part := range parts {
		last := i == len(parts)-1
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			flags = lastFlags
		}
		fd, err := openat(dir, part, flags)
		if err == unix.ENOTDIR && isSymlinkAt(dir, part) {
			// O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink: ENOTDIR.
			err = unix.ELOOP
		}
		closeDir()
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	return dir, nil
}

func isSymlinkAt(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func openat(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// mapErr gives the kernel's answers stem's meaning: ELOOP (a symlink with
// RESOLVE_NO_SYMLINKS or O_NOFOLLOW) and EXDEV (out of the root with
// RESOLVE_BENEATH, or a magic link) become ErrSymlink and ErrPath; the rest
// (ENOENT, ENOTDIR, EACCES ...) stay as they are, so os.ErrNotExist works.
func mapErr(err error) error {
	switch err {
	case unix.ELOOP:
		return fmt.Errorf("%w (%v)", ErrSymlink, err)
	case unix.EXDEV:
		return fmt.Errorf("%w (%v)", ErrPath, err)
	}
	return err
}

// Kind names a file type for an error message ("a directory", "a named
// pipe", ...).
func Kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}
