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

// Ensure creates the instance state directory and returns it.
func Ensure(card, instance string) (string, error) { return ensure(card, instance) }

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
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
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
