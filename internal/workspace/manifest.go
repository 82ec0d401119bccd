package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/lib/tomlmsg"
	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/termtext"
)

// ManifestName is the file at the root of every card repository.
const ManifestName = "stem.toml"

// ManifestSchema is the manifest format version this code reads.
const ManifestSchema = 1

// maxManifestBytes bounds what we parse; a card manifest is a few KiB.
const maxManifestBytes = 1 << 20

// Commands are the shell commands of a task. Empty means "use the profile's
// default" (Deploy has no default outside rp2350).
type Commands struct {
	Build  string `toml:"build" json:"build,omitempty"`
	Test   string `toml:"test" json:"test,omitempty"`
	Run    string `toml:"run" json:"run,omitempty"`
	Debug  string `toml:"debug" json:"debug,omitempty"`
	Deploy string `toml:"deploy" json:"deploy,omitempty"`
	// DebugProgram runs in the "program" pane of the debug layout, for
	// example a simulator waiting for gdb. Empty: the pane holds a terminal
	// that the debugger uses as the program's tty.
	DebugProgram string `toml:"debug_program" json:"debug_program,omitempty"`
}

// merge fills empty fields of c from d.
func (c Commands) merge(d Commands) Commands {
	pick := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	return Commands{
		Build:        pick(c.Build, d.Build),
		Test:         pick(c.Test, d.Test),
		Run:          pick(c.Run, d.Run),
		Debug:        pick(c.Debug, d.Debug),
		Deploy:       pick(c.Deploy, d.Deploy),
		DebugProgram: pick(c.DebugProgram, d.DebugProgram),
	}
}

// Task is one task of a card.
type Task struct {
	ID       string   `toml:"id" json:"id"`
	Title    string   `toml:"title" json:"title"`
	Profiles []string `toml:"profiles" json:"profiles"`
	Targets  []string `toml:"targets" json:"targets,omitempty"`
	Dir      string   `toml:"dir" json:"dir,omitempty"`
	// Editable lists card-relative glob patterns (path.Match syntax, plus
	// "dir/**" for a whole tree) that an assist-level agent may change.
	// Files outside it are editable only when the student marks the buffer.
	Editable []string `toml:"editable" json:"editable,omitempty"`
	// Open lists card-relative paths or path.Match globs of the files the
	// student's editor opens at up and debug, the first one shown. Empty:
	// the files Editable names.
	Open []string `toml:"open" json:"open,omitempty"`
	Commands
	// Overrides holds commands per profile name or per target name; a target
	// entry wins over a profile entry.
	Overrides map[string]Commands `toml:"overrides" json:"overrides,omitempty"`
	// Agents is the task's policy for AI agents (agents.go).
	Agents *Agents `toml:"agents" json:"agents,omitempty"`
}

// Manifest is a card's stem.toml.
type Manifest struct {
	Schema   int      `toml:"schema" json:"schema"`
	Title    string   `toml:"title" json:"title"`
	Defaults Defaults `toml:"defaults" json:"defaults"`
	Tasks    []Task   `toml:"tasks" json:"tasks"`
}

var (
	// Lengths are checked apart (24, 12, 128): a bounded repetition
	// compiles to that many copies of the class, paid at every start-up.
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)
	taskRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)
	dirRE  = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./-]*$`)
)

// ValidName reports whether s may be a series or card name. Names become
// part of container names and labels, so the alphabet is small: lower-case
// letters, digits and '_' (a '-' would make instance names ambiguous).
func ValidName(s string) bool { return len(s) <= 24 && nameRE.MatchString(s) }

// ValidTaskID reports whether s may be a task id.
func ValidTaskID(s string) bool { return len(s) <= 12 && taskRE.MatchString(s) }

// LoadManifest reads and validates the manifest of the card at dir.
func LoadManifest(dir string) (*Manifest, error) {
	m, _, err := LoadManifestInfo(dir)
	return m, err
}

// LoadManifestInfo is LoadManifest that also gives the status of the file
// it read, taken from the open descriptor before reading (nil when the
// file could not be opened): a cache keyed on it is keyed on the very file
// whose content it holds (see internal/lib/filestamp).
func LoadManifestInfo(dir string) (*Manifest, os.FileInfo, error) {
	path := filepath.Join(dir, ManifestName)
	// Opened without following a symlink and non-blocking: the card is
	// writable from the container, where a stem.toml linked to a host file
	// would have stemctl and stem-mcp read (and quote in errors) that file,
	// and a FIFO would hang them (and shell completion) waiting for a
	// writer.
	f, err := beneath.Open(dir, ManifestName)
	switch {
	case errors.Is(err, beneath.ErrSymlink):
		return nil, nil, fmt.Errorf("card manifest %s is a symlink: stem reads only a plain file there (the card is writable from its container, so a link could lead anywhere): replace it with the file itself", path)
	case errors.Is(err, beneath.ErrNotRegular):
		kind := "not a regular file"
		if fi, lerr := os.Lstat(path); lerr == nil {
			kind = beneath.Kind(fi.Mode())
		}
		return nil, nil, fmt.Errorf("card manifest %s is not a regular file (%s): make it a plain TOML file (see docs/manifest.md)", path, kind)
	case err != nil:
		return nil, nil, fmt.Errorf("read card manifest: %w", &os.PathError{Op: "open", Path: path, Err: errors.Unwrap(err)})
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("read card manifest %s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(ioLimit(f, maxManifestBytes+1)); err != nil {
		return nil, fi, fmt.Errorf("read card manifest %s: %w", path, err)
	}
	if buf.Len() > maxManifestBytes {
		return nil, fi, fmt.Errorf("card manifest %s is larger than %d bytes", path, maxManifestBytes)
	}
	m, err := ParseManifest(path, buf.Bytes())
	return m, fi, err
}

// ParseManifest parses manifest bytes; name is used in error messages.
func ParseManifest(name string, data []byte) (*Manifest, error) {
	var m Manifest
	md, err := toml.Decode(string(data), &m)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w (see docs/manifest.md)", name, tomlmsg.ExplainIn(data, err))
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		return nil, fmt.Errorf("parse %s: %s (see docs/manifest.md)", name, tomlmsg.Unknown(data, m, undec))
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := m.checkAgents(data); err != nil {
		return nil, fmt.Errorf("%s: %w (see docs/manifest.md)", name, err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.Schema != ManifestSchema {
		return fmt.Errorf("schema = %d is not supported; this stemctl reads schema = %d", m.Schema, ManifestSchema)
	}
	if len(m.Tasks) == 0 {
		return errors.New("no [[tasks]] declared")
	}
	if err := checkTitle("title", m.Title); err != nil {
		return err
	}
	if err := checkCommands("[defaults]", m.Defaults.Commands); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range m.Tasks {
		t := &m.Tasks[i]
		t.ID = normalizeTaskID(t.ID)
		if !ValidTaskID(t.ID) {
			return fmt.Errorf("task %d: id %q must be lower-case letters, digits or '_' (at most 12)", i+1, t.ID)
		}
		if seen[t.ID] {
			return fmt.Errorf("task %s is declared twice", t.ID)
		}
		seen[t.ID] = true
		if len(t.Profiles) == 0 {
			return fmt.Errorf("task %s: profiles is empty; name at least one profile", t.ID)
		}
		if err := t.checkText(); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		for _, g := range t.Editable {
			if _, err := path.Match(strings.TrimSuffix(g, "/**"), ""); err != nil || g == "" || strings.Contains(g, "..") || strings.HasPrefix(g, "/") {
				return fmt.Errorf("task %s: editable pattern %q must be a card-relative glob", t.ID, g)
			}
		}
		if len(t.Open) > MaxOpen {
			return fmt.Errorf("task %s: open names %d files; at most %d", t.ID, len(t.Open), MaxOpen)
		}
		for _, g := range t.Open {
			if _, err := path.Match(g, ""); err != nil || g == "" || strings.Contains(g, "..") || strings.HasPrefix(g, "/") || strings.HasSuffix(g, "/") || strings.ContainsAny(g, "\x00\n\r") {
				return fmt.Errorf("task %s: open entry %q must be a card-relative file path or glob", t.ID, g)
			}
		}
		if t.Dir != "" && (len(t.Dir) > 128 || !dirRE.MatchString(t.Dir) || strings.Contains(t.Dir, "..") || filepath.IsAbs(t.Dir)) {
			return fmt.Errorf("task %s: dir %q must be a relative path inside the card", t.ID, t.Dir)
		}
		if err := t.validateNames(); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	return nil
}

// checkText checks the task's title, commands and editable patterns as
// text (see text.go).
func (t *Task) checkText() error {
	if err := checkTitle("title", t.Title); err != nil {
		return err
	}
	if err := checkCommands("", t.Commands); err != nil {
		return err
	}
	keys := make([]string, 0, len(t.Overrides))
	for k := range t.Overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := checkLine(k, false); err != nil || len(k) > 64 {
			return fmt.Errorf("[tasks.overrides.%q] is not a profile or target name", termtext.Line(k, 64))
		}
		if err := checkCommands("[tasks.overrides."+k+"]", t.Overrides[k]); err != nil {
			return err
		}
	}
	for _, g := range t.Editable {
		if err := checkLine(g, false); err != nil || len(g) > maxEditable {
			return fmt.Errorf("editable pattern %q must be a card-relative glob of at most %d bytes on one line", termtext.Line(g, 64), maxEditable)
		}
	}
	return nil
}

// validateNames checks the task's profile, target and override names
// against the known profiles, so a misspelt [tasks.overrides.NAME] fails
// when the card is loaded instead of being ignored.
func (t *Task) validateNames() error {
	targets := map[string]bool{}
	var targetNames []string
	for _, name := range t.Profiles {
		p, err := profiles.Get(name)
		if err != nil {
			return &NotFoundError{Kind: "profile", Name: name, Where: "profiles", Candidates: profiles.Names()}
		}
		for _, tg := range p.Targets {
			if !targets[tg.Name] {
				targets[tg.Name] = true
				targetNames = append(targetNames, tg.Name)
			}
		}
	}
	for _, name := range t.Targets {
		if !targets[name] {
			return &NotFoundError{Kind: "target", Name: name, Where: "targets", Candidates: targetNames}
		}
	}
	keys := make([]string, 0, len(t.Overrides))
	for key := range t.Overrides {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if !targets[key] && !contains(t.Profiles, key) {
			return &NotFoundError{Kind: "override", Name: key, Where: "[tasks.overrides]", Candidates: append(append([]string(nil), t.Profiles...), targetNames...)}
		}
	}
	return nil
}

// normalizeTaskID accepts "t4" as well as "4".
func normalizeTaskID(s string) string {
	s = strings.TrimSpace(strings.ToLower(s))
	if len(s) > 1 && s[0] == 't' && s[1] >= '0' && s[1] <= '9' {
		return s[1:]
	}
	return s
}

// TaskIDs returns the declared task ids in manifest order.
func (m *Manifest) TaskIDs() []string {
	ids := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		ids[i] = t.ID
	}
	return ids
}

// Task finds a task by id ("4" or "t4").
func (m *Manifest) Task(id string) (*Task, bool) {
	id = normalizeTaskID(id)
	for i := range m.Tasks {
		if m.Tasks[i].ID == id {
			return &m.Tasks[i], true
		}
	}
	return nil, false
}

// EffectiveCommands resolves the commands for a task run on profile/target:
// target override, profile override, the task, the card defaults, then the
// profile's own defaults.
func (t *Task) EffectiveCommands(defaults Commands, profile, target string, profileDefaults Commands) Commands {
	c := Commands{}
	if o, ok := t.Overrides[target]; ok && target != "" {
		c = c.merge(o)
	}
	if o, ok := t.Overrides[profile]; ok {
		c = c.merge(o)
	}
	c = c.merge(t.Commands)
	c = c.merge(defaults)
	c = c.merge(profileDefaults)
	return c
}
