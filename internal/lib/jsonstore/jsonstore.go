// Package jsonstore is a JSON state file that several stemctl and stem-mcp
// processes share: read under a shared flock on a lock file beside it,
// rewritten under an exclusive one by write-to-temp-and-rename, so a crash
// never leaves a torn file and concurrent writers never lose each other's
// changes. A file that does not decode is explained by package statefile.
// The instance registry and the grants store are both one of these.
package jsonstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/lib/statefile"
)

// Store is the file at Path, locked through Lock. Both must be in the same
// directory, created 0700 on the first write. T is the whole file's
// content.
type Store[T any] struct {
	Path, Lock string
	// Noun names the store in errors ("registry", "grants").
	Noun string
	// What and Repair explain a file that does not decode (see
	// statefile.CorruptError).
	What, Repair string
	// Empty is the content of a missing or blank file.
	Empty func() T
	// Loaded checks and completes what was decoded (schema, nil maps).
	Loaded func(*T) error
	// Saving stamps what is about to be written (the schema).
	Saving func(*T)
}

func (s *Store[T]) dir() string { return filepath.Dir(s.Path) }

// lock takes the lock file. A shared lock on a store whose directory does
// not exist yet takes nothing: there is nothing to read consistently, and
// reading creates nothing.
func (s *Store[T]) lock(ctx context.Context, mode filelock.Mode) (func(), error) {
	if mode == filelock.Exclusive {
		if err := os.MkdirAll(s.dir(), 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", s.dir(), err)
		}
	} else if _, err := os.Stat(s.dir()); errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	unlock, err := filelock.Lock(ctx, s.Lock, mode)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Noun, err)
	}
	return unlock, nil
}

// read decodes the file; the caller holds the lock.
func (s *Store[T]) read() (T, error) {
	v := s.Empty()
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return s.Empty(), fmt.Errorf("read %s: %w", s.Noun, err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return v, nil
	}
	if err := statefile.Unmarshal(s.What, s.Path, data, &v, s.Repair); err != nil {
		return s.Empty(), err
	}
	if s.Loaded != nil {
		if err := s.Loaded(&v); err != nil {
			return s.Empty(), err
		}
	}
	return v, nil
}

// Load returns the content under a shared lock.
func (s *Store[T]) Load(ctx context.Context) (T, error) {
	unlock, err := s.lock(ctx, filelock.Shared)
	if err != nil {
		return s.Empty(), err
	}
	defer unlock()
	return s.read()
}

// Update runs fn on the content under the exclusive lock and writes the
// result atomically (0600); nothing is written if fn fails.
func (s *Store[T]) Update(ctx context.Context, fn func(*T) error) error {
	unlock, err := s.lock(ctx, filelock.Exclusive)
	if err != nil {
		return err
	}
	defer unlock()
	v, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(&v); err != nil {
		return err
	}
	if s.Saving != nil {
		s.Saving(&v)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", s.Noun, err)
	}
	return beneath.ReplaceFile(s.Path, append(data, '\n'), 0o600)
}
