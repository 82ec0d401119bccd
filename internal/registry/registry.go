// Package registry is the durable record of instances: one JSON file under
// the state directory, read and rewritten under an exclusive flock, replaced
// by write-to-temp-and-rename so a crash never leaves a torn file and
// concurrent stemctl processes never lose each other's records.
package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/lib/jsonstore"
	"github.com/stem-edu/stem/internal/lib/statefile"
	"github.com/stem-edu/stem/internal/sockets"
)

// Schema is the registry file format version.
const Schema = 1

// Record is one instance.
type Record struct {
	Instance    string            `json:"instance"`
	Profile     string            `json:"profile"`
	Series      string            `json:"series"`
	Card        string            `json:"card"`
	Task        string            `json:"task"`
	Target      string            `json:"target"`
	ContainerID string            `json:"container_id"`
	Image       string            `json:"image"`
	ConfigHash  string            `json:"config_hash"`
	Schema      int               `json:"schema"` // the container layout's (labels.SchemaVersion)
	SocketDir   string            `json:"socket_dir"`
	ThreadKey   string            `json:"thread_key"`
	InstanceKey string            `json:"instance_key"`
	CardPath    string            `json:"card_path"`
	Workspace   string            `json:"workspace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Devices     []string          `json:"devices,omitempty"`
	// Git is the card's .git the container was given read-only; an
	// instance made by an older stem has none.
	Git *cardgit.Identity `json:"git,omitempty"`
	// Policy is the task's agent policy when the instance was made: the
	// card (its stem.toml) can be rewritten from inside the container,
	// so stem-mcp holds the card's current policy to this one at least.
	// An instance made by an older stem has none.
	Policy  *agentpolicy.Policy `json:"agent_policy,omitempty"`
	Created time.Time           `json:"created"`
	Updated time.Time           `json:"updated"`
}

// SocketDir returns the record's socket directory as a sockets.Dir.
func (r Record) Dir() sockets.Dir { return sockets.Dir{Path: r.SocketDir, ContainerID: r.ContainerID} }

// UpCommand is the stemctl command line that brings the record's instance
// up again (or repairs it): what error messages tell the user to run.
func (r Record) UpCommand() string {
	c := fmt.Sprintf("stemctl up %s %s %s %s", r.Profile, r.Series, r.Card, r.Task)
	if r.Target != "" {
		c += " --target " + r.Target
	}
	return c
}

type file struct {
	Schema    int               `json:"schema"`
	Instances map[string]Record `json:"instances"`
}

// Registry is the file at <state>/registry.json with its lock file.
type Registry struct {
	file jsonstore.Store[file]
}

// Open returns the registry under stateDir; the directory is created 0700.
func Open(stateDir string) (*Registry, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", stateDir, err)
	}
	path := filepath.Join(stateDir, "registry.json")
	return &Registry{file: jsonstore.Store[file]{
		Path: path, Lock: filepath.Join(stateDir, "registry.lock"),
		Noun: "registry", What: "the registry",
		Repair: "move it aside (" + statefile.MoveAside(path) + ") and run `stemctl up` again for each instance: it takes each instance's container back as it is",
		Empty:  func() file { return file{Schema: Schema, Instances: map[string]Record{}} },
		Loaded: func(f *file) error {
			if f.Schema > Schema {
				return fmt.Errorf("registry %s has schema %d, newer than this stemctl (%d): upgrade stemctl", path, f.Schema, Schema)
			}
			if f.Instances == nil {
				f.Instances = map[string]Record{}
			}
			return nil
		},
		Saving: func(f *file) { f.Schema = Schema },
	}}, nil
}

// Path is the registry file.
func (r *Registry) Path() string { return r.file.Path }

// LockInstance serializes work on one instance across stemctl processes
// (two `up`s of the same task must not both create, or one re-create what
// the other just started). The lock file is <state>/locks/<instance>.lock.
func (r *Registry) LockInstance(ctx context.Context, instance string) (func(), error) {
	if instance == "" || strings.ContainsAny(instance, "/\x00") || instance == "." || instance == ".." {
		return nil, fmt.Errorf("invalid instance name %q", instance)
	}
	dir := filepath.Join(filepath.Dir(r.file.Path), "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create lock directory %s: %w", dir, err)
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, instance+".lock"), filelock.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("instance %s is busy (another stemctl is bringing it up?): %w", instance, err)
	}
	return unlock, nil
}

// ErrNotFound is returned by Get for an unknown instance.
var ErrNotFound = errors.New("no such instance in the registry")

// List returns every record sorted by instance name.
func (r *Registry) List(ctx context.Context) ([]Record, error) {
	f, err := r.file.Load(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(f.Instances))
	for _, rec := range f.Instances {
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out, nil
}

// Get returns one record or ErrNotFound.
func (r *Registry) Get(ctx context.Context, instance string) (Record, error) {
	recs, err := r.List(ctx)
	if err != nil {
		return Record{}, err
	}
	for _, rec := range recs {
		if rec.Instance == instance {
			return rec, nil
		}
	}
	return Record{}, fmt.Errorf("%w: %s", ErrNotFound, instance)
}

// Find resolves an instance name, a full container id, or a container id
// prefix of at least 12 hex digits. An ambiguous prefix is an error.
func (r *Registry) Find(ctx context.Context, ref string) (Record, error) {
	recs, err := r.List(ctx)
	if err != nil {
		return Record{}, err
	}
	var hits []Record
	for _, rec := range recs {
		if rec.Instance == ref || rec.ContainerID == ref {
			return rec, nil
		}
		if len(ref) >= 12 && strings.HasPrefix(rec.ContainerID, ref) {
			hits = append(hits, rec)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		names := make([]string, len(recs))
		for i, rec := range recs {
			names[i] = rec.Instance
		}
		if len(names) == 0 {
			return Record{}, fmt.Errorf("%w: %q (the registry is empty; start one with `stemctl up`)", ErrNotFound, ref)
		}
		return Record{}, fmt.Errorf("%w: %q (known: %s)", ErrNotFound, ref, strings.Join(names, ", "))
	default:
		return Record{}, fmt.Errorf("container id prefix %q matches %d instances; give more digits", ref, len(hits))
	}
}

// Update runs fn on the records under the exclusive lock and writes the
// result atomically. If fn returns an error nothing is written.
func (r *Registry) Update(ctx context.Context, fn func(map[string]Record) error) error {
	return r.file.Update(ctx, func(f *file) error { return fn(f.Instances) })
}

// Put inserts or replaces a record, stamping Updated (and Created if zero).
func (r *Registry) Put(ctx context.Context, rec Record) error {
	if rec.Instance == "" {
		return errors.New("registry: record without instance name")
	}
	now := time.Now().UTC()
	if rec.Created.IsZero() {
		rec.Created = now
	}
	rec.Updated = now
	return r.Update(ctx, func(m map[string]Record) error {
		m[rec.Instance] = rec
		return nil
	})
}

// Delete removes a record; a missing record is not an error.
func (r *Registry) Delete(ctx context.Context, instance string) error {
	return r.Update(ctx, func(m map[string]Record) error {
		delete(m, instance)
		return nil
	})
}
