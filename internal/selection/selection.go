// Package selection switches the MCP selection: the symlink
// $XDG_RUNTIME_DIR/stem/mcp-selected/current pointing at one container's
// socket directory. A long-lived provider always dials current/{t,n}.sock, so
// switching the link moves its next operation to another session.
//
// The switch is atomic: a new link is made under a temporary name and
// renamed over `current` (never unlink-then-create, which would leave a
// moment with no selection or let a racing writer win half-way).
package selection

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stem-edu/stem/internal/sockets"
)

// Dir returns (and creates, 0700) the mcp-selected directory.
func ensureDir(l sockets.Layout) (string, error) {
	for _, p := range []string{l.Root(), filepath.Join(l.Root(), sockets.SelectedDir)} {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create %s: %w", p, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("refusing to use %s: it is not a directory (or is a symlink)", p)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("refusing to use %s: it must be yours with mode 0700", p)
		}
	}
	return filepath.Join(l.Root(), sockets.SelectedDir), nil
}

// CheckPaths asserts the selection's socket paths fit the AF_UNIX limit.
func CheckPaths(l sockets.Layout) error {
	return sockets.CheckLengths(l.Selected())
}

// Select points `current` at dir atomically. The caller has verified dir.
func Select(l sockets.Layout, dir sockets.Dir) error {
	if err := CheckPaths(l); err != nil {
		return err
	}
	if !strings.HasPrefix(dir.Path, l.Root()+string(filepath.Separator)) {
		return fmt.Errorf("socket directory %s is outside %s", dir.Path, l.Root())
	}
	sel, err := ensureDir(l)
	if err != nil {
		return err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("random name: %w", err)
	}
	tmp := filepath.Join(sel, ".current-"+hex.EncodeToString(b[:]))
	if err := os.Symlink(dir.Path, tmp); err != nil {
		return fmt.Errorf("create selection link: %w", err)
	}
	if err := os.Rename(tmp, l.Selected()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("switch selection: %w", err)
	}
	return nil
}

// ErrNone means nothing is selected.
var ErrNone = errors.New("no instance is selected: run `stemctl mcp select INSTANCE`")

// Current returns the directory `current` points at. It never follows the
// link to check the target; callers verify it against the registry.
func Current(l sockets.Layout) (string, error) {
	target, err := os.Readlink(l.Selected())
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNone
	}
	if err != nil {
		return "", fmt.Errorf("read selection %s: %w", l.Selected(), err)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(l.Selected()), target)
	}
	return filepath.Clean(target), nil
}

// Clear removes the selection (used when the selected instance is removed).
func Clear(l sockets.Layout) error {
	err := os.Remove(l.Selected())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear selection: %w", err)
	}
	return nil
}
