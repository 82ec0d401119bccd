package workspace

import (
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxOpen bounds the files a task opens in the editor (entries of open, and
// files OpenFiles returns).
const MaxOpen = 16

// OpenFiles returns the absolute paths of the files the student's editor
// opens for the task, first shown first: what open names, or by default
// what editable names (a "dir/**" tree is not opened). Globs expand in
// name order; only regular files inside the card count (not symlinks, and
// not through a directory that leads out of the card), each once, at most
// MaxOpen. A name that matches nothing is left out: the editor opens what
// exists.
func (r *Resolved) OpenFiles() []string {
	patterns := r.Open
	if len(patterns) == 0 {
		for _, g := range r.Editable {
			if !strings.HasSuffix(g, "/**") {
				patterns = append(patterns, g)
			}
		}
	}
	realCard, err := filepath.EvalSymlinks(r.CardPath)
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, g := range patterns {
		if _, err := path.Match(g, ""); err != nil || strings.Contains(g, "..") || path.IsAbs(g) {
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(r.CardPath, filepath.FromSlash(g)))
		for _, m := range matches {
			if len(out) == MaxOpen {
				return out
			}
			if seen[m] || !insideCard(realCard, m) {
				continue
			}
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// insideCard reports whether p is a regular file (not a symlink) whose
// directory resolves inside the card.
func insideCard(realCard, p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return false
	}
	return dir == realCard || strings.HasPrefix(dir, realCard+string(filepath.Separator))
}
