// Package cardstate keeps an instance's state inside the card repository:
// <card>/.stem/instances/<instance>/ (older layouts used .rv/ and are read as
// a fallback). The card repository is content stem did not write, so no
// component of the path may be a symlink: a hostile repository must not
// redirect our writes elsewhere.
package cardstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/sockets"
)

const (
	primary  = ".stem"
	fallback = ".rv"
	// InstanceFile is the JSON record written for each instance.
	InstanceFile = "instance.json"
)

// Dir is <card>/.stem/instances/<instance>.
func Dir(card, instance string) string {
	return filepath.Join(card, primary, "instances", instance)
}

// ensure creates each component below card, refusing symlinks and
// non-directories.
func ensure(card, instance string) (string, error) {
	cur := card
	for _, part := range []string{primary, "instances", instance} {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create %s: %w", cur, err)
		}
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("refusing to use %s: it is a symlink or not a directory", cur)
		}
	}
	return cur, nil
}

// HistoryFile is the shell history stem-init points HISTFILE at.
const HistoryFile = "bash_history"

// maxCarry bounds what is copied from an older layout.
const maxCarry = 4 << 20

// Ensure creates the instance state directory and returns it. A shell
// history left under .rv/ by an older layout is carried over when .stem/ has
// none yet, so the student keeps it.
func Ensure(card, instance string) (string, error) {
	dir, err := ensure(card, instance)
	if err != nil {
		return "", err
	}
	if err := carryHistory(card, instance, dir); err != nil {
		return dir, err
	}
	return dir, nil
}

// Prepare is Ensure for a first start: it also returns undo, which takes
// away what Prepare made when that start fails, so the card is left as it
// was: the history it carried over and an instance.json (only in a
// directory Prepare created), then each directory it created, if empty.
// Nothing is followed: every level is opened with O_NOFOLLOW, and a file
// or directory someone else put there since stays.
func Prepare(card, instance string) (dir string, undo func(), err error) {
	var fresh []string // levels below card that do not exist yet, top first
	cur := card
	for _, part := range []string{primary, "instances", instance} {
		cur = filepath.Join(cur, part)
		if _, err := os.Lstat(cur); errors.Is(err, os.ErrNotExist) {
			fresh = append(fresh, part)
		} else {
			fresh = fresh[:0]
		}
	}
	undo = func() {
		if len(fresh) == 0 {
			return
		}
		parts := []string{primary, "instances", instance}
		// The instance directory was ours: what stem put in it goes.
		if fd, err := openDirChain(card, parts); err == nil {
			unix.Unlinkat(fd, HistoryFile, 0)
			unix.Unlinkat(fd, InstanceFile, 0)
			unix.Close(fd)
		}
		for i := len(parts) - 1; i >= len(parts)-len(fresh); i-- {
			fd, err := openDirChain(card, parts[:i])
			if err != nil {
				return
			}
			err = unix.Unlinkat(fd, parts[i], unix.AT_REMOVEDIR)
			unix.Close(fd)
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return
			}
		}
	}
	dir, err = Ensure(card, instance)
	if err != nil {
		undo()
		return "", func() {}, err
	}
	return dir, undo, nil
}

// openDirChain opens card/parts... as a directory, each level with
// O_NOFOLLOW|O_DIRECTORY relative to the one above, so no level can be a
// symlink.
func openDirChain(card string, parts []string) (int, error) {
	fd, err := unix.Open(card, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, p := range parts {
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// carryHistory copies .rv/instances/<instance>/bash_history into dir unless
// dir already has one. Every component of the old path must be a real
// directory (or, last, a regular file): the repository is not ours.
func carryHistory(card, instance, dir string) error {
	dst := filepath.Join(dir, HistoryFile)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	cur := card
	for _, part := range []string{fallback, "instances", instance} {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return nil // nothing (usable) to carry over
		}
	}
	f, err := openRegular(filepath.Join(cur, HistoryFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxCarry {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCarry))
	if err != nil {
		return fmt.Errorf("read the old history in %s: %w", cur, err)
	}
	return sockets.WriteFileAtomic(dst, data, 0o600)
}

// Write stores v as instance.json atomically.
func Write(card, instance string, v any) error {
	dir, err := ensure(card, instance)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode instance state: %w", err)
	}
	return sockets.WriteFileAtomic(filepath.Join(dir, InstanceFile), append(data, '\n'), 0o644)
}

// Read loads instance.json from .stem, or from .rv when .stem has none.
// It returns the directory it read from.
func Read(card, instance string, v any) (string, error) {
	var firstErr error
	for _, root := range []string{primary, fallback} {
		dir := filepath.Join(card, root, "instances", instance)
		p := filepath.Join(dir, InstanceFile)
		f, err := openRegularIn(card, []string{root, "instances", instance}, InstanceFile)
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && (!fi.Mode().IsRegular() || fi.Size() > maxState) {
				err = fmt.Errorf("read %s: not a regular file under %d KiB", p, maxState>>10)
			}
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		err = json.NewDecoder(f).Decode(v)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("decode %s: %w", p, err)
		}
		return dir, nil
	}
	return "", fmt.Errorf("no state for instance %s in %s: %w", instance, card, firstErr)
}

// maxState bounds instance.json as read back.
const maxState = 1 << 20

// openRegularIn opens card/parts.../name like openRegular, with no level
// of the path a symlink: the container can replace .stem or .rv with a
// link to somewhere on the host it cannot see.
func openRegularIn(card string, parts []string, name string) (*os.File, error) {
	p := filepath.Join(append(append([]string{card}, parts...), name)...)
	fd, err := openDirChain(card, parts)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	ffd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(ffd), p), nil
}

// openRegular opens a file in the card repo (which the container can
// write) for reading: never through a final symlink, and without blocking
// on a planted FIFO (callers refuse what is not a regular file).
func openRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}
