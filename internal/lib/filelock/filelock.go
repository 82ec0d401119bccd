// Package filelock takes advisory locks (flock) on a lock file, waiting
// until a context ends rather than forever, so a wedged peer process never
// hangs a command. Several stem processes share the registry, the audit log,
// the grants store and each tmux server; they all serialize through this.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Mode is shared (readers) or exclusive (writers).
type Mode int

const (
	Shared    Mode = syscall.LOCK_SH
	Exclusive Mode = syscall.LOCK_EX
)

// Lock opens (creating, mode 0600, never following a symlink) the file at
// path and takes the lock, polling with a growing delay until ctx ends. The
// returned function releases it.
func Lock(ctx context.Context, path string, mode Mode) (func(), error) {
	// Some lock files sit in directories a container can write (t.sock.lock):
	// O_NOCTTY and O_NONBLOCK keep a planted tty or FIFO from becoming our
	// terminal or blocking the open, and anything but a regular file is
	// refused.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return LockFile(ctx, f, path, mode)
}

// LockFile is Lock on a lock file the caller opened (for one in a
// directory the container can swap, internal/lib/beneath.OpenOrCreate); path
// names it in errors. LockFile owns f: it is closed on failure and by the
// returned function.
func LockFile(ctx context.Context, f *os.File, path string, mode Mode) (func(), error) {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	delay := 500 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), int(mode)|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w (another process holds it)", path, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}
