package sockets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RemoveStale removes every container directory of an instance except keep
// (a cid12, or "" to remove all). It refuses to act on a symlinked or foreign
// instance directory. It returns the removed paths.
func (l Layout) RemoveStale(threadKey, instanceKey, keep string) ([]string, error) {
	return l.removeEntries(threadKey, instanceKey, func(e os.DirEntry) bool { return e.Name() != keep })
}

// entries lists an instance directory (none if it is missing), refusing a
// symlinked or foreign one.
func (l Layout) entries(threadKey, instanceKey string) (string, []os.DirEntry, error) {
	dir := l.InstanceDir(threadKey, instanceKey)
	if err := checkDir(dir, true); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return dir, nil, nil
		}
		return dir, nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return dir, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return dir, ents, nil
}

// removeEntries removes the entries of an instance directory that pick
// chooses (RemoveAll follows no symlink inside them) and returns their
// paths. A missing instance directory has none.
func (l Layout) removeEntries(threadKey, instanceKey string, pick func(os.DirEntry) bool) ([]string, error) {
	dir, ents, err := l.entries(threadKey, instanceKey)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		if !pick(e) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("remove stale socket directory %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// IsCID12 reports whether name has the form of a container directory's
// name: the 12 lower-case hex digits of a container id prefix.
func IsCID12(name string) bool {
	return len(name) == 12 && cidRE.MatchString(name)
}

// Siblings lists an instance's container directories other than keep (a
// cid12): real directories, not symlinks, whose names are container id
// prefixes. They are a predecessor's, left behind (a crash, a container
// removed behind stem's back). Anything else in the instance directory is
// not listed, and RemoveSiblings leaves it alone.
func (l Layout) Siblings(threadKey, instanceKey, keep string) ([]string, error) {
	if !validKey(threadKey) || !validKey(instanceKey) {
		return nil, fmt.Errorf("invalid socket keys %q/%q", threadKey, instanceKey)
	}
	dir, ents, err := l.entries(threadKey, instanceKey)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if isSibling(e, keep) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// isSibling: ReadDir's type comes from lstat semantics, so a symlink is
// never reported as a directory.
func isSibling(e os.DirEntry, keep string) bool {
	return e.Name() != keep && IsCID12(e.Name()) && e.IsDir() && e.Type()&os.ModeSymlink == 0
}

// RemoveSiblings removes the directories Siblings lists and returns them.
func (l Layout) RemoveSiblings(threadKey, instanceKey, keep string) ([]string, error) {
	if !validKey(threadKey) || !validKey(instanceKey) {
		return nil, fmt.Errorf("invalid socket keys %q/%q", threadKey, instanceKey)
	}
	return l.removeEntries(threadKey, instanceKey, func(e os.DirEntry) bool { return isSibling(e, keep) })
}
