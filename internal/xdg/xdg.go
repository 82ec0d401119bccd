// Package xdg resolves the per-user directories stem uses: the runtime
// directory for sockets, the state directory for the registry and audit log,
// and the config directory for grants and provider settings.
//
// Everything is derived from an explicit environment lookup so tests (and the
// SSH gate, which runs with a minimal environment) never depend on process
// globals.
package xdg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Dirs holds the resolved directories. All paths are absolute.
type Dirs struct {
	Runtime string // $XDG_RUNTIME_DIR (sockets live under Runtime/stem)
	State   string // $XDG_STATE_HOME/stem
	Config  string // $XDG_CONFIG_HOME/stem
	Home    string
	UID     int
}

// Getenv is the signature of os.Getenv; tests pass a map-backed lookup.
type Getenv func(string) string

// Resolve computes the directories from env. The runtime directory falls back
// to /run/user/<uid> when XDG_RUNTIME_DIR is unset (SSH forced commands and
// root shells often lack it); it is created with mode 0700 only when it is
// missing and the parent allows it.
func Resolve(getenv Getenv) (Dirs, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	d := Dirs{UID: os.Getuid()}
	d.Home = getenv("HOME")
	if d.Home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return Dirs{}, fmt.Errorf("cannot find the home directory: set HOME: %w", err)
		}
		d.Home = h
	}
	d.Runtime = getenv("XDG_RUNTIME_DIR")
	if d.Runtime == "" {
		d.Runtime = filepath.Join("/run/user", strconv.Itoa(d.UID))
		if err := ensureFallbackRuntime(d.Runtime); err != nil {
			return Dirs{}, err
		}
	}
	if !filepath.IsAbs(d.Runtime) {
		return Dirs{}, fmt.Errorf("XDG_RUNTIME_DIR=%q is not an absolute path", d.Runtime)
	}
	d.State = pick(getenv("STEM_STATE_DIR"), getenv("XDG_STATE_HOME"), filepath.Join(d.Home, ".local", "state"))
	d.Config = pick(getenv("STEM_CONFIG_DIR"), getenv("XDG_CONFIG_HOME"), filepath.Join(d.Home, ".config"))
	return d, nil
}

// pick returns override as-is (it already names stem's own directory), or
// base/stem for the first non-empty base.
func pick(override, xdgBase, fallback string) string {
	if override != "" {
		return filepath.Clean(override)
	}
	if xdgBase != "" && filepath.IsAbs(xdgBase) {
		return filepath.Join(xdgBase, "stem")
	}
	return filepath.Join(fallback, "stem")
}

func ensureFallbackRuntime(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("runtime directory %s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runtime directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("XDG_RUNTIME_DIR is not set and %s cannot be created (%v); export XDG_RUNTIME_DIR=/run/user/$(id -u) from a login session", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("XDG_RUNTIME_DIR is not set and %s cannot be created (%v); export XDG_RUNTIME_DIR=/run/user/$(id -u) from a login session", dir, err)
	}
	return nil
}
