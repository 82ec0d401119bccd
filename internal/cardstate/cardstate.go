// Package cardstate keeps an instance's state inside the card repository:
// <card>/.stem/instances/<instance>/ (older layouts used .rv/ and are read as
// a fallback). The card repository is content stem did not write and is
// mounted writable into the container, so no component of the path may be
// a symlink, at any moment: every read and write goes through
// internal/lib/beneath, relative to a descriptor of the card.
package cardstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stem-edu/stem/internal/lib/beneath"
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

// rel is the slash-separated path of an instance's directory below the
// card in the layout root (primary or fallback).
func rel(root, instance string) string {
	return root + "/instances/" + instance
}

// ensure creates each level below card (internal/lib/beneath: each one made
// and opened relative to the one above, nothing followed), refusing
// symlinks and non-directories. It returns the levels it made, top first.
func ensure(card, instance string) (string, []string, error) {
	made, err := beneath.MkdirAll(card, rel(primary, instance), 0o755)
	if err != nil {
		return "", made, fmt.Errorf("card state in %s: %w", card, err)
	}
	return Dir(card, instance), made, nil
}

// HistoryFile is the shell history stem-init points HISTFILE at.
const HistoryFile = "bash_history"

// maxCarry bounds what is copied from an older layout.
const maxCarry = 4 << 20

// Ensure creates the instance state directory and returns it. A shell
// history left under .rv/ by an older layout is carried over when .stem/ has
// none yet, so the student keeps it.
func Ensure(card, instance string) (string, error) {
	dir, _, err := ensure(card, instance)
	if err != nil {
		return "", err
	}
	if err := carryHistory(card, instance); err != nil {
		return dir, err
	}
	return dir, nil
}

// Prepare is Ensure for a first start: it also returns undo, which takes
// away what Prepare made when that start fails, so the card is left as it
// was: the history it carried over and an instance.json (only in a
// directory Prepare created), then each directory it created, if empty.
// Nothing is followed (internal/lib/beneath), and a file or directory someone
// else put there since stays.
func Prepare(card, instance string) (dir string, undo func(), err error) {
	dir, made, err := ensure(card, instance)
	undo = func() {
		if len(made) == 0 {
			return
		}
		// The instance directory was ours: what stem put in it goes.
		if d := rel(primary, instance); made[len(made)-1] == d {
			beneath.Remove(card, d+"/"+HistoryFile)
			beneath.Remove(card, d+"/"+InstanceFile)
		}
		for i := len(made) - 1; i >= 0; i-- {
			if err := beneath.RemoveDir(card, made[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				return
			}
		}
	}
	if err == nil {
		err = carryHistory(card, instance)
	}
	if err != nil {
		undo()
		return "", func() {}, err
	}
	return dir, undo, nil
}

// carryHistory copies .rv/instances/<instance>/bash_history to
// .stem/instances/<instance>/ unless that has one. Both are reached
// through internal/lib/beneath: the container can swap any level of either
// for a symlink at any moment, and a followed one would copy a host file
// (~/.ssh/id_ed25519) where the container reads it, or write outside.
func carryHistory(card, instance string) error {
	dst := rel(primary, instance) + "/" + HistoryFile
	if _, err := beneath.Lstat(card, dst); err == nil {
		return nil
	}
	f, err := beneath.Open(card, rel(fallback, instance)+"/"+HistoryFile)
	if err != nil {
		return nil // nothing (usable) to carry over
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() > maxCarry {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCarry))
	if err != nil {
		return fmt.Errorf("read the old history in %s: %w", filepath.Join(card, rel(fallback, instance)), err)
	}
	if err := beneath.WriteFileAtomic(card, dst, data, 0o600); err != nil {
		return fmt.Errorf("card state in %s: %w", card, err)
	}
	return nil
}

// Write stores v as instance.json atomically.
func Write(card, instance string, v any) error {
	if _, _, err := ensure(card, instance); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode instance state: %w", err)
	}
	if err := beneath.WriteFileAtomic(card, rel(primary, instance)+"/"+InstanceFile, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("card state in %s: %w", card, err)
	}
	return nil
}

// Read loads instance.json from .stem, or from .rv when .stem has none.
// It returns the directory it read from. No level of the path may be a
// symlink: the container can replace .stem or .rv with a link to
// somewhere on the host it cannot see.
func Read(card, instance string, v any) (string, error) {
	var firstErr error
	for _, root := range []string{primary, fallback} {
		dir := filepath.Join(card, root, "instances", instance)
		p := filepath.Join(dir, InstanceFile)
		data, err := beneath.ReadFile(card, rel(root, instance)+"/"+InstanceFile, maxState)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s: %w", p, err)
			}
			continue
		}
		if err := json.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
			return "", fmt.Errorf("decode %s: %w", p, err)
		}
		return dir, nil
	}
	return "", fmt.Errorf("no state for instance %s in %s: %w", instance, card, firstErr)
}

// maxState bounds instance.json as read back.
const maxState = 1 << 20
