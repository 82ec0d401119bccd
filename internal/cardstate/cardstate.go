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
		f, err := openRegular(p)
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

// openRegular opens a file in the card repo (which the container can
// write) for reading: never through a final symlink, and without blocking
// on a planted FIFO (callers refuse what is not a regular file).
func openRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}
