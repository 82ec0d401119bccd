package access

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/lib/jsonstore"
	"github.com/stem-edu/stem/internal/lib/statefile"
)

// Schema is the grants file format version.
const Schema = 1

// Grant is one teacher automation key's permission on this account. The
// authorized_keys line carries only the grant's ID; everything that decides
// what the key may do lives here, where the SSH client cannot reach it.
type Grant struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Level          string    `json:"level"`
	Instances      []string  `json:"instances,omitempty"` // empty: every instance of this account
	KeyFP          string    `json:"key_fingerprint"`
	PublicKey      string    `json:"public_key"` // "type base64", no comment
	From           string    `json:"from,omitempty"`
	Expires        time.Time `json:"expires,omitzero"`
	Created        time.Time `json:"created"`
	AuthorizedKeys string    `json:"authorized_keys"` // the file holding the line
	Command        string    `json:"command"`         // the forced command written
}

// Label names the grant in audit entries: "name:id" (names are unique at
// any moment, IDs forever).
func (g Grant) Label() string { return g.Name + ":" + g.ID }

// Expired reports whether the grant has expired at now.
func (g Grant) Expired(now time.Time) bool { return !g.Expires.IsZero() && !now.Before(g.Expires) }

// Allows reports whether the grant covers instance.
func (g Grant) Allows(instance string) bool {
	if len(g.Instances) == 0 {
		return true
	}
	for _, i := range g.Instances {
		if i == instance {
			return true
		}
	}
	return false
}

// State is the content of the grants file.
type State struct {
	Schema int `json:"schema"`
	// Env is the environment the gate hands to stem-mcp. sshd starts the
	// gate with almost no environment (no XDG variables), so stemctl records
	// here where this account's runtime, state and config directories are.
	Env    map[string]string `json:"env"`
	Grants map[string]Grant  `json:"grants"`
}

// Find returns the grant with ID ref, or else the grant named ref. Grant
// keeps names unique; should a hand-edited store name two grants alike,
// Find returns the one with the smallest ID (not whichever map order gives
// first) and Named lists them all.
func (s *State) Find(ref string) (Grant, bool) {
	if g, ok := s.Grants[ref]; ok {
		return g, true
	}
	if named := s.Named(ref); len(named) > 0 {
		return named[0], true
	}
	return Grant{}, false
}

// Named returns the grants named name, by ID.
func (s *State) Named(name string) []Grant {
	var out []Grant
	for _, g := range s.Grants {
		if g.Name == name {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Sorted returns the grants by name, then ID (the map's order never shows).
func (s *State) Sorted() []Grant {
	out := make([]Grant, 0, len(s.Grants))
	for _, g := range s.Grants {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Store is <config>/access/grants.json with a lock file beside it.
type Store struct {
	dir  string
	file jsonstore.Store[State]
}

// StoreDir is where the grants live under a config directory.
func StoreDir(configDir string) string { return filepath.Join(configDir, "access") }

// OpenStore returns the store under configDir (stem's config directory).
// Nothing is created until the first write.
func OpenStore(configDir string) (*Store, error) {
	if !filepath.IsAbs(configDir) {
		return nil, fmt.Errorf("config directory %q is not an absolute path", configDir)
	}
	dir := StoreDir(filepath.Clean(configDir))
	path := filepath.Join(dir, "grants.json")
	return &Store{dir: dir, file: jsonstore.Store[State]{
		Path: path, Lock: filepath.Join(dir, "grants.lock"),
		Noun: "grants", What: "the grants file",
		Repair: "every teacher is refused until it is repaired, or moved aside (" + statefile.MoveAside(path) + ") and each teacher granted again with `stemctl access grant`",
		Empty:  func() State { return State{Schema: Schema, Env: map[string]string{}, Grants: map[string]Grant{}} },
		Loaded: func(st *State) error {
			if st.Schema > Schema {
				return fmt.Errorf("grants file %s has schema %d, newer than this program (%d): upgrade stem", path, st.Schema, Schema)
			}
			if st.Env == nil {
				st.Env = map[string]string{}
			}
			if st.Grants == nil {
				st.Grants = map[string]Grant{}
			}
			return nil
		},
		Saving: func(st *State) { st.Schema = Schema },
	}}, nil
}

// Path is the grants file.
func (s *Store) Path() string { return s.file.Path }

// Load returns the current state under a shared lock.
func (s *Store) Load(ctx context.Context) (*State, error) {
	st, err := s.file.Load(ctx)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// LoadChecked is Load for the gate: it also refuses a grants file or
// directory that someone other than this account could have written, since
// whoever writes it decides what a key may do.
func (s *Store) LoadChecked(ctx context.Context) (*State, error) {
	for _, p := range []string{s.dir, s.file.Path} {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no grants on this account (%s is missing)", p)
		}
		if err != nil {
			return nil, fmt.Errorf("grants: %w", err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("refusing grants at %s: it is a symlink", p)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("refusing grants at %s: owned by uid %d, not %d", p, st.Uid, os.Geteuid())
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return nil, fmt.Errorf("refusing grants at %s: writable by group or others (mode %v); chmod go-w it", p, fi.Mode().Perm())
		}
	}
	return s.Load(ctx)
}

// Update runs fn on the state under the exclusive lock and writes the
// result atomically; nothing is written if fn fails.
func (s *Store) Update(ctx context.Context, fn func(*State) error) error {
	return s.file.Update(ctx, fn)
}
