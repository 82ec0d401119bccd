package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CardsSourcePath keeps the course's cards that lab init was given, which
// add, import and update use when --cards names none.
func CardsSourcePath(dir string) string { return filepath.Join(dir, "cards.source") }

// CourseCards is the cards source lab init recorded in dir ("" for none).
func CourseCards(dir string) (string, error) {
	data, err := os.ReadFile(CardsSourcePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the course's cards: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// SetCourseCards records src (a directory of cards, or a git repository
// holding one) as the course's cards in dir, once it holds cards: a
// directory is read, a repository cloned. The same src again is left.
func SetCourseCards(ctx context.Context, dir, src string) Step {
	st := Step{Account: "system", Name: "course cards"}
	if !IsGitSource(src) {
		abs, err := filepath.Abs(src)
		if err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
		src = abs
	}
	if have, err := CourseCards(dir); err == nil && have == src {
		st.Result, st.Detail = Already, src
		return st
	}
	var err error
	if IsGitSource(src) {
		_, err = FetchCards(ctx, dir, src)
	} else {
		_, err = courseCards(src)
	}
	if err == nil {
		err = writeAtomic(CardsSourcePath(dir), src+"\n")
	}
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, src+": add, import and update copy these cards when --cards names none"
	return st
}

// writeAtomic writes a root-owned 0600 file (a repository address may
// carry a token) by renaming a new one over it.
func writeAtomic(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(data)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// StoreChoicePath keeps the image store lab init, add, import or update
// was last given (a path, or "none"): lab status and the others use it
// when --shared-store names none, so a lab enrolled with its own stores
// is not checked against a shared one it never had.
func StoreChoicePath(dir string) string { return filepath.Join(dir, "shared-store") }

// StoreChoice is the store recorded in dir ("" for none recorded).
func StoreChoice(dir string) (string, error) {
	data, err := os.ReadFile(StoreChoicePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the lab's image store: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// SetStoreChoice records store ("none" or an absolute path) in dir.
func SetStoreChoice(dir, store string) error {
	if have, err := StoreChoice(dir); err == nil && have == store {
		return nil
	}
	if err := writeAtomic(StoreChoicePath(dir), store+"\n"); err != nil {
		return fmt.Errorf("record the lab's image store: %w", err)
	}
	return nil
}
