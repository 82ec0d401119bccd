// Package consent is the host's record of what the student allowed, per
// instance: the panes an assist agent may type into, the files it may edit
// beyond those the manifest lists, and the agent policy floor.
//
// Threat model: everything in the container is hostile — the card and its
// stem.toml, `.stem/`, the socket directory, its tmux (options such as
// @stem_allow) and its Neovim (buffer variables such as b:stem_allow_edit).
// A decision stored in any of those is one code in the container can take.
// This record lives in the host state directory (one JSON file beside the
// registry, never mounted into a container) and is only written by stemctl
// commands the student runs on the host, or by stemctl's own lifecycle
// (which may only tighten it). stem-mcp reads it, never writes it.
package consent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/sockets"
)

// Schema is the consent file format version.
const Schema = 1

// Pane is one pane the student opened to assist-level keys. A pane id
// means something only in one run of one container's tmux: a re-created
// container has another id, and a restarted one starts without any.
type Pane struct {
	ContainerID string    `json:"container_id"`
	Pane        string    `json:"pane"`
	Since       time.Time `json:"since"`
	By          string    `json:"by"` // the host input that allowed it
}

// Edit is one card file the student opened to assist-level edits.
type Edit struct {
	File  string    `json:"file"` // card-relative, slash-separated
	Since time.Time `json:"since"`
	By    string    `json:"by"`
}

// Entry is one instance's consents.
type Entry struct {
	Panes []Pane `json:"panes,omitempty"`
	Edits []Edit `json:"edits,omitempty"`
	// Floor is the agent policy recorded when the instance was first
	// made, or the one the student loosened it to on the host: no policy
	// read from the card later is looser than this one.
	Floor      *agentpolicy.Policy `json:"policy_floor,omitempty"`
	FloorSince time.Time           `json:"policy_floor_since,omitzero"`
	FloorBy    string              `json:"policy_floor_by,omitempty"`
	// EditableFloor is the task's editable globs recorded beside Floor,
	// and loosened with it: the manifest makes a file editable only when
	// these name it too, so a glob added to stem.toml from inside the
	// container opens nothing. nil: none recorded (an instance made before
	// they were), and the manifest opens nothing until the student
	// loosens on the host.
	EditableFloor *[]string `json:"editable_floor,omitempty"`
}

// FloorEditable is EditableFloor, empty when none is recorded.
func (e Entry) FloorEditable() []string {
	if e.EditableFloor == nil {
		return nil
	}
	return *e.EditableFloor
}

// PaneAllowed reports whether the student allowed keys to pane of the
// container cid.
func (e Entry) PaneAllowed(cid, pane string) bool {
	return cid != "" && slices.ContainsFunc(e.Panes, func(p Pane) bool { return p.ContainerID == cid && p.Pane == pane })
}

// PanesOf lists the panes allowed in container cid.
func (e Entry) PanesOf(cid string) []Pane {
	var out []Pane
	for _, p := range e.Panes {
		if p.ContainerID == cid {
			out = append(out, p)
		}
	}
	return out
}

// Editable reports whether the student marked the card file rel editable.
func (e Entry) Editable(rel string) bool {
	return slices.ContainsFunc(e.Edits, func(x Edit) bool { return x.File == rel })
}

type file struct {
	Schema    int              `json:"schema"`
	Instances map[string]Entry `json:"instances"`
}

// Store is <state>/consent.json with its lock file.
type Store struct {
	path, lock string
}

// Open returns the store in the host state directory stateDir.
func Open(stateDir string) (*Store, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("consent: state directory %q is not an absolute path", stateDir)
	}
	return &Store{path: filepath.Join(stateDir, "consent.json"), lock: filepath.Join(stateDir, "consent.lock")}, nil
}

// Path is the consent file.
func (s *Store) Path() string { return s.path }

func (s *Store) read() (file, error) {
	f := file{Schema: Schema, Instances: map[string]Entry{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read consents: %w", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		// Fail closed: no pane, no file, and no policy (callers refuse).
		return f, fmt.Errorf("consent file %s is corrupt (%v): agents are refused keys and marked edits until it is repaired or moved aside (then allow again with `stemctl allow`)", s.path, err)
	}
	if f.Schema > Schema {
		return f, fmt.Errorf("consent file %s has schema %d, newer than this program (%d): upgrade stem", s.path, f.Schema, Schema)
	}
	if f.Instances == nil {
		f.Instances = map[string]Entry{}
	}
	return f, nil
}

// Get returns the consents of instance (none recorded: a zero Entry).
func (s *Store) Get(ctx context.Context, instance string) (Entry, error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return Entry{}, fmt.Errorf("consent: %w", err)
	}
	unlock, err := filelock.Lock(ctx, s.lock, filelock.Shared)
	if err != nil {
		return Entry{}, fmt.Errorf("consent store: %w", err)
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return Entry{}, err
	}
	return f.Instances[instance], nil
}

// Update runs fn on instance's entry under the exclusive lock and writes
// the result atomically; nothing is written if fn fails.
func (s *Store) Update(ctx context.Context, instance string, fn func(*Entry) error) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("consent: %w", err)
	}
	unlock, err := filelock.Lock(ctx, s.lock, filelock.Exclusive)
	if err != nil {
		return fmt.Errorf("consent store: %w", err)
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	e := f.Instances[instance]
	if err := fn(&e); err != nil {
		return err
	}
	if len(e.Panes) == 0 && len(e.Edits) == 0 && e.Floor == nil && e.EditableFloor == nil {
		delete(f.Instances, instance)
	} else {
		f.Instances[instance] = e
	}
	f.Schema = Schema
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode consents: %w", err)
	}
	return sockets.WriteFileAtomic(s.path, append(data, '\n'), 0o600)
}

// Delete forgets instance (`stemctl rm`): the next `up` starts afresh.
func (s *Store) Delete(ctx context.Context, instance string) error {
	return s.Update(ctx, instance, func(e *Entry) error {
		*e = Entry{}
		return nil
	})
}

// Settle records that instance now runs in container cid under the card's
// policy card, and returns the policy to record for it: card met with the
// floor. The first call sets the floor (to prior, the policy an older
// record holds, when there is one; else to card) and the editable floor
// (to editable, the card's globs). Pane permissions of earlier
// containers, and of an earlier run of this one, go: a pane id names
// another pane once tmux has started again.
func (s *Store) Settle(ctx context.Context, instance, cid string, prior *agentpolicy.Policy, card agentpolicy.Policy, editable []string, by string) (agentpolicy.Policy, error) {
	var out agentpolicy.Policy
	err := s.Update(ctx, instance, func(e *Entry) error {
		if e.Floor == nil {
			f := card
			if prior != nil {
				f = *prior
			}
			e.Floor, e.FloorSince, e.FloorBy = &f, time.Now().UTC(), by
		}
		if e.EditableFloor == nil {
			g := append([]string{}, editable...)
			e.EditableFloor = &g
		}
		e.Panes = nil
		out = agentpolicy.Meet(*e.Floor, card)
		return nil
	})
	return out, err
}

// SetFloor makes p the floor of instance: the student loosened (or
// tightened) it on the host, through input named by.
func (s *Store) SetFloor(ctx context.Context, instance string, p agentpolicy.Policy, by string) error {
	return s.Update(ctx, instance, func(e *Entry) error {
		e.Floor, e.FloorSince, e.FloorBy = &p, time.Now().UTC(), by
		return nil
	})
}

// Loosen makes p the floor of instance and editable its editable floor:
// the student took the card's current policy and globs on the host,
// through input named by.
func (s *Store) Loosen(ctx context.Context, instance string, p agentpolicy.Policy, editable []string, by string) error {
	return s.Update(ctx, instance, func(e *Entry) error {
		g := append([]string{}, editable...)
		e.Floor, e.FloorSince, e.FloorBy, e.EditableFloor = &p, time.Now().UTC(), by, &g
		return nil
	})
}

// CleanFile turns a file named by the student into the card-relative,
// slash-separated form edits are checked against: rel must stay inside
// the card and out of its git and stem state.
func CleanFile(rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q is not a path inside the card", rel)
	}
	c := path.Clean(filepath.ToSlash(rel))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q is not a path inside the card", rel)
	}
	first, _, _ := strings.Cut(c, "/")
	if slices.Contains([]string{".git", ".stem", ".rv"}, first) {
		return "", fmt.Errorf("%s is inside %s, which agents never edit", c, first)
	}
	return c, nil
}
