// Package proposals is the host's record of edits proposed to the student
// (a task whose agent policy is edits = "propose") and the one place they
// are decided.
//
// stem-mcp writes each proposal it hands to the student's editor here,
// with the proposed lines, the lines they replace, the hunks and who
// proposed it: the host's own copy, kept after the proposer's session
// ends. Only `stemctl proposals accept|reject`, run on the host by the
// student, settles one (Apply): it makes the change from the host (Neovim
// RPC into the buffer when the file is open there, the card's safe write
// path when not), records it in provenance and the audit log with the
// host input that decided it, and tells the editor to stop showing it.
//
// Threat model: everything in the container is hostile, the editor and
// its plugin included. The store lives under the host state directory
// (0700, never mounted in a container); nothing the container says
// (ids, states, rows) is taken as a decision. The editor's :StemAccept
// only marks a request, which the host shows and the student confirms.
package proposals

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/provenance"
)

// States of a proposal and of each hunk.
const (
	Pending  = "pending"
	Accepted = "accepted"
	Partial  = "partially_accepted"
	Rejected = "rejected"
	Stale    = "stale"
)

// Hunk is one change of a proposal, as the host computed it from its own
// snapshot of the buffer: Old lines at line Start (1-based, in the buffer
// when it was proposed) become New. An insertion (no Old) goes before
// Start; Ctx is then the line it is anchored to (the line above it, or
// below it at the top of the buffer, Before).
type Hunk struct {
	Start  int      `json:"start"`
	Old    []string `json:"old"`
	New    []string `json:"new"`
	Ctx    string   `json:"ctx,omitempty"`
	Before bool     `json:"before,omitempty"`
	State  string   `json:"state"`
	// At is the 1-based line an accepted hunk's first new line went to.
	At int `json:"at,omitempty"`
}

// Decision is how a proposal was settled.
type Decision struct {
	// Input is the host input that decided, e.g. "stemctl proposals on
	// /dev/pts/5".
	Input string    `json:"input"`
	At    time.Time `json:"at"`
	// Where the change went: "neovim" (the open buffer) or "file".
	Via string `json:"via,omitempty"`
}

// Record is one proposal.
type Record struct {
	// Key is random, the host's name for the proposal and the token the
	// editor ties it to; ID is the editor's (p1, p2, ...), which starts
	// again in a restarted editor.
	Key      string `json:"key"`
	ID       string `json:"id"`
	Instance string `json:"instance"`
	Card     string `json:"card"`
	Path     string `json:"path"` // card-relative
	Buf      int    `json:"buffer"`
	// From names the proposer for a person ("agent a1a1a1"); Who is the
	// MCP identity provenance records.
	From     string         `json:"from"`
	Who      provenance.Who `json:"who"`
	Tool     string         `json:"tool"`
	Created  time.Time      `json:"created"`
	AuditSeq int64          `json:"audit_seq,omitempty"`
	Hunks    []Hunk         `json:"hunks"`
	State    string         `json:"state"`
	Decided  *Decision      `json:"decided,omitempty"`
}

// Overall is the proposal's state from its hunks.
func Overall(hs []Hunk) string {
	var acc, stale, pending int
	for _, h := range hs {
		switch h.State {
		case Accepted:
			acc++
		case Stale:
			stale++
		case Pending, "":
			pending++
		}
	}
	switch {
	case pending > 0:
		return Pending
	case acc == len(hs):
		return Accepted
	case acc > 0:
		return Partial
	case stale > 0:
		return Stale
	}
	return Rejected
}

// Store is one instance's proposals: <state>/proposals/<instance hash>/.
type Store struct {
	dir      string
	instance string
}

// Open returns instance's store under stateDir (created 0700 on write).
func Open(stateDir, instance string) *Store {
	sum := sha256.Sum256([]byte(instance))
	return &Store{dir: filepath.Join(stateDir, "proposals", hex.EncodeToString(sum[:12])), instance: instance}
}

// Dir is where the store keeps its files.
func (s *Store) Dir() string { return s.dir }

// NewKey returns a random key for a new proposal.
func NewKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("proposal key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

var keyRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

func (s *Store) file(key string) (string, error) {
	if !keyRE.MatchString(key) {
		return "", fmt.Errorf("proposal key %q: want 32 hex digits", key)
	}
	return filepath.Join(s.dir, key+".json"), nil
}

// Put writes r (atomically: a reader sees the old record or the new).
func (s *Store) Put(r *Record) error {
	if r.Instance != s.instance {
		return fmt.Errorf("proposal %s is of instance %s, not %s", r.ID, r.Instance, s.instance)
	}
	file, err := s.file(r.Key)
	if err != nil {
		return err
	}
	r.State = Overall(r.Hunks)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create the proposal store %s: %w", s.dir, err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode proposal %s: %w", r.ID, err)
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write proposal %s: %w", r.ID, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("write proposal %s to %s: %w", r.ID, s.dir, err)
	}
	return nil
}

// Get reads the proposal with key.
func (s *Store) Get(key string) (*Record, error) {
	file, err := s.file(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read proposal %s: %w", key, err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("proposal record %s: %w", file, err)
	}
	return &r, nil
}

// List reads every proposal, oldest first.
func (s *Store) List() ([]*Record, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list proposals in %s: %w", s.dir, err)
	}
	var out []*Record
	for _, e := range ents {
		key, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !keyRE.MatchString(key) {
			continue
		}
		r, err := s.Get(key)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Find returns the proposal a student names: the editor's id (the newest
// proposal with it, as ids start again in a restarted editor) or a key
// or its first 8 or more digits.
func (s *Store) Find(name string) (*Record, error) {
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		r := all[i]
		if r.ID == name || (len(name) >= 8 && strings.HasPrefix(r.Key, name)) {
			return r, nil
		}
	}
	return nil, fmt.Errorf("instance %s has no proposal %q: `stemctl proposals %s` lists them", s.instance, name, s.instance)
}

// ForFile reads every instance's proposals to path in card, oldest first.
func ForFile(stateDir, card, path string) ([]*Record, error) {
	dirs, err := os.ReadDir(filepath.Join(stateDir, "proposals"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the proposal stores: %w", err)
	}
	var out []*Record
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		all, err := (&Store{dir: filepath.Join(stateDir, "proposals", d.Name())}).List()
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			if r.Card == card && r.Path == path {
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// minMatchBytes: shorter lines ("}", "return 0;") match a proposal's by
// chance too often to say anything.
const minMatchBytes = 10

// Unaccepted is, for each line blame gives to the container, the newest
// proposal whose new lines include it in a hunk no host decision
// accepted: text an agent proposed that reached the file without the
// student's yes on the host (typed alike, copied, or written by code in
// the container).
func Unaccepted(recs []*Record, text []string, lines []provenance.Line) map[int]*Record {
	by := map[string]*Record{}
	for _, r := range recs {
		for _, h := range r.Hunks {
			if h.State == Accepted {
				continue
			}
			for _, l := range h.New {
				if len(strings.TrimSpace(l)) >= minMatchBytes {
					by[l] = r // the newest wins
				}
			}
		}
	}
	out := map[int]*Record{}
	for i, l := range lines {
		if l.By != provenance.ByContainer || i >= len(text) {
			continue
		}
		if r := by[strings.TrimSuffix(text[i], "\r")]; r != nil {
			out[i] = r
		}
	}
	return out
}
