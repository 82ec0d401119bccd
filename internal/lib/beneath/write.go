package beneath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// dirFlags opens a directory that is acted in (mkdirat, openat, renameat,
// unlinkat) and can be fsynced: not O_PATH.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK

// parent opens the directory holding rel (root itself for a single
// component) below root, nothing followed, and returns it with rel's last
// component. op names the caller in errors.
func parent(op, root, rel string) (int, string, error) {
	if err := checkRel(rel); err != nil {
		return -1, "", &os.PathError{Op: op, Path: rel, Err: err}
	}
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		fd, err := unix.Open(root, dirFlags&^unix.O_NOFOLLOW, 0)
		if err != nil {
			return -1, "", &os.PathError{Op: op, Path: root, Err: err}
		}
		return fd, rel, nil
	}
	fd, err := openRel(op, root, rel[:i], dirFlags)
	if err != nil {
		return -1, "", err
	}
	return fd, rel[i+1:], nil
}

// OpenDir opens the directory rel below root, nothing followed, for use
// as the directory of *at calls (and, through /proc/self/fd/N/NAME, of
// calls that take only a path, such as bind).
func OpenDir(root, rel string) (*os.File, error) {
	fd, err := openRel("open", root, rel, dirFlags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// MkdirAll makes the directory rel below root and every missing level
// above it (mode perm, less the umask), one level at a time: mkdirat in
// the level above, then that level opened with O_NOFOLLOW|O_DIRECTORY
// relative to it. An existing level must be a directory, not a symlink
// (ErrSymlink) nor anything else (ENOTDIR). It returns the levels it made,
// slash-separated relative to root, top first (on an error too), so a
// caller can take them away again with RemoveDir.
func MkdirAll(root, rel string, perm os.FileMode) (made []string, err error) {
	if err := checkRel(rel); err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: root, Err: err}
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		cur := strings.Join(parts[:i+1], "/")
		err := mkdirat(fd, part, perm)
		switch err {
		case nil:
			made = append(made, cur)
		case unix.EEXIST:
		default:
			unix.Close(fd)
			return made, &os.PathError{Op: "mkdir", Path: cur, Err: mapErr(err)}
		}
		next, err := openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err == unix.ENOTDIR && isSymlinkAt(fd, part) {
			err = unix.ELOOP
		}
		unix.Close(fd)
		if err != nil {
			return made, &os.PathError{Op: "mkdir", Path: cur, Err: mapErr(err)}
		}
		fd = next
	}
	unix.Close(fd)
	return made, nil
}

// Mkdir makes the directory rel below root (its parent must exist).
// An existing name is an error wrapping os.ErrExist, whatever it is.
func Mkdir(root, rel string, perm os.FileMode) error {
	dfd, base, err := parent("mkdir", root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := mkdirat(dfd, base, perm); err != nil {
		return &os.PathError{Op: "mkdir", Path: rel, Err: mapErr(err)}
	}
	return nil
}

// OpenOrCreate opens the regular file rel below root for reading and
// writing, creating it with perm if it is missing (never truncating):
// the parent directory is opened below root without following anything,
// the file with openat(O_CREAT|O_NOFOLLOW|O_NONBLOCK|O_NOCTTY) in it. A
// lock file beside a socket is what it is for.
func OpenOrCreate(root, rel string, perm os.FileMode) (*os.File, error) {
	dfd, base, err := parent("open", root, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	var fd int
	err = retry(func() (err error) {
		fd, err = unix.Openat(dfd, base, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: mapErr(err)}
	}
	f := os.NewFile(uintptr(fd), rel)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w (%s)", ErrNotRegular, Kind(fi.Mode()))
		}
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return f, nil
}

// ReplaceFile is WriteFileAtomic with path's directory as the root, and
// path in its errors. It resolves that directory as given: for paths only
// this program controls.
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	err := WriteFileAtomic(filepath.Dir(path), filepath.Base(path), data, perm)
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return err
}

// WriteFileAtomic replaces rel below root with data (mode perm): the
// parent directory is opened below root without following anything; a
// temporary file is created in it with openat(O_CREAT|O_EXCL|O_NOFOLLOW),
// written, fchmod'ed and fsynced, then renamed over rel within that
// directory (renameat replaces a symlink at rel, never follows it), and
// the directory is fsynced. The temporary file goes again on failure.
func WriteFileAtomic(root, rel string, data []byte, perm os.FileMode) error {
	dfd, base, err := parent("write", root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = "." + base + ".tmp" + randomSuffix()
		err = retry(func() (err error) {
			fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
			return err
		})
		if err != unix.EEXIST || i == 9 {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: rel, Err: mapErr(err)}
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) error {
		f.Close()
		unix.Unlinkat(dfd, tmp, 0)
		return &os.PathError{Op: "write", Path: rel, Err: err}
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return &os.PathError{Op: "write", Path: rel, Err: err}
	}
	if err := retry(func() error { return unix.Renameat(dfd, tmp, dfd, base) }); err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return &os.PathError{Op: "write", Path: rel, Err: err}
	}
	if err := retry(func() error { return unix.Fsync(dfd) }); err != nil {
		return &os.PathError{Op: "sync", Path: rel, Err: err}
	}
	return nil
}

// Remove removes the name rel below root, which must not be a directory
// (a symlink there is removed itself, not followed).
func Remove(root, rel string) error {
	return unlink("remove", root, rel, 0)
}

// RemoveDir removes the empty directory rel below root.
func RemoveDir(root, rel string) error {
	return unlink("rmdir", root, rel, unix.AT_REMOVEDIR)
}

func unlink(op, root, rel string, flags int) error {
	dfd, base, err := parent(op, root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := retry(func() error { return unix.Unlinkat(dfd, base, flags) }); err != nil {
		return &os.PathError{Op: op, Path: rel, Err: err}
	}
	return nil
}

// Lstat describes rel below root without following it: the directories
// on the way are opened as everywhere here, the last component is not
// followed (a symlink is described as one).
func Lstat(root, rel string) (os.FileInfo, error) {
	dfd, base, err := parent("lstat", root, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := openat(dfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	return f.Stat()
}

func mkdirat(dir int, name string, perm os.FileMode) error {
	return retry(func() error { return unix.Mkdirat(dir, name, uint32(perm.Perm())) })
}

func retry(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
