package mcpserver

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/errcode"
)

// maxPathBytes bounds any path an MCP client sends.
const maxPathBytes = 1024

// protectedDirs are never writable through MCP, even when a glob would
// match: git internals (hooks and config run code on the host) and stem's
// own state.
var protectedDirs = []string{".git", ".stem", ".rv"}

// cardPath is a path proven to lie inside the card repository.
type cardPath struct {
	Abs string // absolute, symlinks resolved
	Rel string // slash-separated, relative to the card root
}

// resolveCardPath checks a client-supplied path (card-relative, or absolute
// inside the card) and resolves symlinks: the real file must be inside the
// card's real root. mustExist=false allows a missing final component (its
// parent must exist inside the card).
func resolveCardPath(cardRoot, p string, mustExist bool) (cardPath, error) {
	if err := checkPathText(p); err != nil {
		return cardPath{}, err
	}
	root, err := filepath.EvalSymlinks(cardRoot)
	if err != nil {
		return cardPath{}, fmt.Errorf("card repository %s: %w", cardRoot, err)
	}
	var joined string
	if filepath.IsAbs(p) {
		joined = filepath.Clean(p)
		// Accept absolute paths under the card's recorded or real root.
		if !within(filepath.Clean(cardRoot), joined) && !within(root, joined) {
			return cardPath{}, errcode.Errorf(errcode.OutsideCard, "path %q is outside the card repository %s", p, cardRoot)
		}
		if within(filepath.Clean(cardRoot), joined) {
			rel, _ := filepath.Rel(filepath.Clean(cardRoot), joined)
			joined = filepath.Join(root, rel)
		}
	} else {
		joined = filepath.Join(root, p)
		if !within(root, joined) {
			return cardPath{}, errcode.Errorf(errcode.OutsideCard, "path %q leaves the card repository", p)
		}
	}
	real, err := filepath.EvalSymlinks(joined)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) || mustExist {
			return cardPath{}, fmt.Errorf("path %q: %w", p, notExistPlain(err))
		}
		parent, perr := filepath.EvalSymlinks(filepath.Dir(joined))
		if perr != nil {
			return cardPath{}, fmt.Errorf("path %q: its directory does not exist", p)
		}
		real = filepath.Join(parent, filepath.Base(joined))
	}
	if !within(root, real) {
		return cardPath{}, errcode.Errorf(errcode.OutsideCard, "path %q resolves outside the card repository (a symlink?)", p)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil {
		return cardPath{}, err
	}
	return cardPath{Abs: real, Rel: filepath.ToSlash(rel)}, nil
}

func notExistPlain(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("no such file in the card repository")
	}
	return err
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// checkPathText rejects text that has no business in a file name we pass
// on: control characters, newlines, NUL, invalid UTF-8, excessive length.
func checkPathText(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case len(p) > maxPathBytes:
		return fmt.Errorf("path is %d bytes; the limit is %d", len(p), maxPathBytes)
	case !utf8.ValidString(p):
		return errors.New("path is not valid UTF-8")
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("path contains a control character (%U)", r)
		}
	}
	return nil
}

// protected reports whether rel lies in a directory MCP may never write, at
// any depth: a nested repository's .git (a submodule, a repository the
// student made in a task directory) runs its hooks on the host just the
// same.
func protected(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		for _, d := range protectedDirs {
			if part == d {
				return true
			}
		}
	}
	return false
}

// matchEditable reports whether rel matches one of the task's editable
// globs ("dir/**" matches the whole tree under dir).
func matchEditable(globs []string, rel string) bool {
	if protected(rel) {
		return false
	}
	for _, g := range globs {
		if strings.HasSuffix(g, "/**") {
			if within("/"+strings.TrimSuffix(g, "/**"), "/"+rel) {
				return true
			}
			continue
		}
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
	}
	return false
}
