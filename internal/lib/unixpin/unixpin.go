// Package unixpin connects to a unix socket path without following a
// symlink at its end or in place of its directory, and without a gap
// between checking the path and connecting to it.
//
// An instance's socket directory is writable from inside its container
// (tmux and nvim create their sockets there). A check with lstat followed
// by connect(path) leaves a window in which the container can rename a
// symlink over t.sock and send the host's client to any socket on the
// host. Here the path is opened once with O_PATH|O_NOFOLLOW, relative to
// its directory opened the same way (a symlink at the end or in place of
// the directory is refused, anything but a socket is refused: the
// container can also rename its whole socket directory away and put a
// symlink there), and the connect goes through
// /proc/self/fd/N, which names that very inode whatever happens to the
// path afterwards. A child process (a tmux client) gets the descriptor as
// its fd 3 and the path ChildPath.
package unixpin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrSymlink means the path's last component is a symlink.
var ErrSymlink = errors.New("a symlink, not a socket (refused: something that can write the directory may have planted it)")

// errSymlinkDir is ErrSymlink for the socket's directory.
var errSymlinkDir = symlinkDir{}

type symlinkDir struct{}

func (symlinkDir) Error() string {
	return "a symlink (refused: something that can write the directory above it may have swapped it in)"
}
func (symlinkDir) Is(target error) bool { return target == ErrSymlink }

// ErrNotSocket means the path is neither a socket nor a symlink.
var ErrNotSocket = errors.New("not a socket")

// ChildPath is the socket's path in a child process that received
// Socket.File() as its first extra file (exec.Cmd.ExtraFiles[0] is fd 3).
const ChildPath = "/proc/self/fd/3"

// Socket is an opened (not connected) socket inode.
type Socket struct {
	f    *os.File
	path string
}

// Open opens path without following a symlink at its end or in place of
// the directory holding it: the socket's directory (a <cid12> in the
// instance directory, which the container can write) is opened with
// O_PATH|O_NOFOLLOW|O_DIRECTORY relative to the directory above it, and
// the socket relative to that, so a <cid12> renamed away and replaced by a
// symlink to another directory with a t.sock cannot redirect the client
// either. The levels above the socket's directory are the caller's
// trusted path. Errors wrap os.ErrNotExist, ErrSymlink or ErrNotSocket and
// name the path.
func Open(path string) (*Socket, error) {
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	up, base := filepath.Dir(dir), filepath.Base(dir)
	if name == "" {
		return nil, &os.PathError{Op: "open", Path: path, Err: unix.EISDIR}
	}
	if dir == up { // "/" or "."
		base = dir
	}
	ufd, err := unix.Open(up, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: up, Err: err}
	}
	// Without O_DIRECTORY, so that what was opened can say what it is (a
	// symlink is opened itself, O_PATH|O_NOFOLLOW).
	dfd, err := unix.Openat(ufd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(ufd)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil || dst.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(dfd)
		switch {
		case err != nil:
			return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
		case dst.Mode&unix.S_IFMT == unix.S_IFLNK:
			return nil, fmt.Errorf("%s: its directory %s is %w", path, dir, errSymlinkDir)
		}
		return nil, &os.PathError{Op: "open", Path: dir, Err: unix.ENOTDIR}
	}
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
	case unix.S_IFLNK:
		unix.Close(fd)
		return nil, fmt.Errorf("%s is %w", path, ErrSymlink)
	default:
		unix.Close(fd)
		return nil, fmt.Errorf("%s is %w", path, ErrNotSocket)
	}
	return &Socket{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Path names the opened socket for a connect from this process.
func (s *Socket) Path() string { return "/proc/self/fd/" + strconv.Itoa(int(s.f.Fd())) }

// File is the descriptor, to hand to a child as its first extra file.
func (s *Socket) File() *os.File { return s.f }

// Close releases the descriptor; connections made through it stay.
func (s *Socket) Close() error { return s.f.Close() }

// Dial connects to the socket at path (see Open).
func Dial(ctx context.Context, path string) (net.Conn, error) {
	s, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", s.Path())
	if err != nil {
		// The error would name /proc/self/fd/N; name the real path.
		var op *net.OpError
		if errors.As(err, &op) {
			return nil, fmt.Errorf("connect %s: %w", path, op.Err)
		}
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	return c, nil
}
