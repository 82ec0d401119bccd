// Package workspace finds series, cards and tasks under the workspace
// ($STEM_WORKSPACE, default ~/dev/workspace/stem) and reads card manifests.
// A card is a directory <workspace>/<series>/<card> holding stem.toml.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/profiles"
)

// DefaultRoot returns $STEM_WORKSPACE, or ~/dev/workspace/stem.
func DefaultRoot(getenv func(string) string, home string) string {
	if w := getenv("STEM_WORKSPACE"); w != "" {
		return w
	}
	return filepath.Join(home, "dev", "workspace", "stem")
}

// Workspace is a directory of series.
type Workspace struct {
	Root string
}

// Open checks that root is a directory and returns it with an absolute,
// symlink-free path (instances record it, so it must be stable).
func Open(root string) (*Workspace, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("workspace %s does not exist: set STEM_WORKSPACE or create it (make demo installs the example workspace)", abs)
		case errors.Is(err, syscall.ENOTDIR):
			return nil, fmt.Errorf("workspace %s is not a directory (a file is in its path): set STEM_WORKSPACE to the directory holding your series", abs)
		case strings.Contains(err.Error(), "too many links") || errors.Is(err, syscall.ELOOP):
			return nil, fmt.Errorf("workspace %s is a symlink loop: point STEM_WORKSPACE at a real directory", abs)
		}
		return nil, fmt.Errorf("workspace %s: %w", abs, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", real, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory: set STEM_WORKSPACE to the directory holding your series", real)
	}
	return &Workspace{Root: real}, nil
}

// NotFoundError says which name was not found and what exists instead.
type NotFoundError struct {
	Kind       string   `json:"kind"` // series, card, task, profile, target
	Name       string   `json:"name"`
	Where      string   `json:"where"`
	Candidates []string `json:"candidates"`
}

// maxEcho bounds how much of a bad name an error repeats: a pasted file or
// a runaway variable must not turn a one-line error into a screenful.
const maxEcho = 64

// echo quotes s for an error message, cut to maxEcho bytes on a rune
// boundary.
func echo(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown %s %s", e.Kind, echo(e.Name))
	if e.Where != "" {
		fmt.Fprintf(&b, " in %s", e.Where)
	}
	if s := closest(e.Name, e.Candidates); s != "" {
		fmt.Fprintf(&b, ": did you mean %q?", s)
	}
	if len(e.Candidates) == 0 {
		fmt.Fprintf(&b, " (there are no %s entries there)", e.Kind)
	} else {
		fmt.Fprintf(&b, " (%s: %s)", plural(e.Kind), strings.Join(e.Candidates, ", "))
	}
	return b.String()
}

func plural(kind string) string {
	if kind == "series" {
		return kind
	}
	return kind + "s"
}

// Series lists the series: directories holding at least one card.
func (w *Workspace) Series() ([]string, error) {
	ents, err := os.ReadDir(w.Root)
	if err != nil {
		return nil, fmt.Errorf("list workspace %s: %w", w.Root, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || !ValidName(e.Name()) {
			continue
		}
		cards, _ := w.Cards(e.Name())
		if len(cards) > 0 {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Cards lists the cards of a series: subdirectories with a stem.toml.
func (w *Workspace) Cards(series string) ([]string, error) {
	dir := filepath.Join(w.Root, series)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list series %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || !ValidName(e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), ManifestName)); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// CardPath returns the card directory after checking both names exist.
func (w *Workspace) CardPath(series, card string) (string, error) {
	all, err := w.Series()
	if err != nil {
		return "", err
	}
	if !ValidName(series) || !contains(all, series) {
		if err := symlinked("series", w.Root, series, series); err != nil {
			return "", err
		}
		return "", &NotFoundError{Kind: "series", Name: series, Where: w.Root, Candidates: all}
	}
	cards, err := w.Cards(series)
	if err != nil {
		return "", err
	}
	if !ValidName(card) || !contains(cards, card) {
		if err := symlinked("card", filepath.Join(w.Root, series), card, series+"/"+card); err != nil {
			return "", err
		}
		return "", &NotFoundError{Kind: "card", Name: card, Where: "series " + series, Candidates: cards}
	}
	return filepath.Join(w.Root, series, card), nil
}

// symlinked explains a series or card that is not listed because it is a
// symlink: the container mounts the card at its path, and a link would let
// a workspace reach (and the container write) anywhere on the host.
func symlinked(kind, parent, name, display string) error {
	if !ValidName(name) { // never look up a path given as a name
		return nil
	}
	path := filepath.Join(parent, name)
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	to, _ := os.Readlink(path)
	return fmt.Errorf("%s %s is a symlink (to %s); stem uses only real directories inside the workspace: move or copy it into %s", kind, display, strconv.Quote(to), parent)
}

// Resolved is a fully resolved (profile, series, card, task, target).
type Resolved struct {
	Workspace string           `json:"workspace"`
	Series    string           `json:"series"`
	Card      string           `json:"card"`
	CardPath  string           `json:"card_path"`
	TaskID    string           `json:"task"`
	TaskTitle string           `json:"task_title"`
	TaskDir   string           `json:"task_dir"` // absolute working directory
	Profile   profiles.Profile `json:"-"`
	Target    profiles.Target  `json:"target"`
	Commands  Commands         `json:"commands"`
	Editable  []string         `json:"editable,omitempty"`
	Open      []string         `json:"open,omitempty"`
	// Policy is the task's agent policy (agents.go).
	Policy   agentpolicy.Policy `json:"agent_policy"`
	Manifest *Manifest          `json:"-"`
}

// Resolve resolves a request. profile may be empty: the task's first profile
// is used. target may be empty: the task's first target on that profile, or
// the profile's default.
func (w *Workspace) Resolve(profile, series, card, task, target string) (*Resolved, error) {
	cardPath, err := w.CardPath(series, card)
	if err != nil {
		return nil, err
	}
	m, err := LoadManifest(cardPath)
	if err != nil {
		return nil, err
	}
	t, ok := m.Task(task)
	if !ok {
		return nil, &NotFoundError{Kind: "task", Name: task, Where: series + "/" + card, Candidates: m.TaskIDs()}
	}
	if profile == "" {
		profile = t.Profiles[0]
	}
	p, err := profiles.Get(profile)
	if err != nil {
		return nil, &NotFoundError{Kind: "profile", Name: profile, Candidates: profiles.Names()}
	}
	if !contains(t.Profiles, profile) {
		return nil, fmt.Errorf("task %s of %s/%s runs on %s, not on %s", t.ID, series, card, strings.Join(t.Profiles, " or "), profile)
	}
	if target == "" {
		for _, tn := range t.Targets {
			if _, err := p.ResolveTarget(tn); err == nil {
				target = tn
				break
			}
		}
	}
	tg, err := p.ResolveTarget(target)
	if err != nil {
		names := make([]string, len(p.Targets))
		for i, x := range p.Targets {
			names[i] = x.Name
		}
		return nil, &NotFoundError{Kind: "target", Name: target, Where: "profile " + p.Name, Candidates: names}
	}
	if len(t.Targets) > 0 && !contains(t.Targets, tg.Name) && p.MultiTarget() {
		return nil, fmt.Errorf("task %s of %s/%s is for target %s, not %s", t.ID, series, card, strings.Join(t.Targets, " or "), tg.Name)
	}
	taskDir := cardPath
	if t.Dir != "" {
		taskDir = filepath.Join(cardPath, filepath.FromSlash(t.Dir))
		if err := checkTaskDir(cardPath, taskDir, t, series+"/"+card); err != nil {
			return nil, err
		}
	}
	pd := p.Commands
	return &Resolved{
		Workspace: w.Root,
		Series:    series,
		Card:      card,
		CardPath:  cardPath,
		TaskID:    t.ID,
		TaskTitle: t.Title,
		TaskDir:   taskDir,
		Profile:   p,
		Target:    tg,
		Commands: t.EffectiveCommands(m.Defaults.Commands, p.Name, tg.Name, Commands{
			Build: pd.Build, Test: pd.Test, Run: pd.Run, Debug: pd.Debug, Deploy: pd.Deploy, DebugProgram: pd.DebugProgram,
		}),
		Editable: t.Editable,
		Open:     t.Open,
		Policy:   m.AgentPolicy(t),
		Manifest: m,
	}, nil
}

// checkTaskDir requires the task's working directory to be a directory
// inside the card. The container sees the card at the same path, so a
// symlink out of it would make the task run (and podman create missing
// directories) outside the student's repository.
func checkTaskDir(cardPath, taskDir string, t *Task, where string) error {
	real, err := filepath.EvalSymlinks(taskDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("task %s of %s: its dir %q does not exist in %s: create it or fix dir in stem.toml", t.ID, where, t.Dir, cardPath)
		}
		return fmt.Errorf("task %s of %s: dir %q: %w", t.ID, where, t.Dir, err)
	}
	if real != cardPath && !strings.HasPrefix(real, cardPath+string(filepath.Separator)) {
		return fmt.Errorf("task %s of %s: dir %q leads out of the card (to %s) through a symlink: a task works inside its card; replace the link with a directory", t.ID, where, t.Dir, real)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("task %s of %s: dir %q: %w", t.ID, where, t.Dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("task %s of %s: dir %q is not a directory: fix dir in stem.toml", t.ID, where, t.Dir)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the candidate within edit distance 2 of name, if any. A
// candidate that would have to be rewritten entirely ("5" for "1") is no
// suggestion.
func closest(name string, cands []string) string {
	best, bestD := "", 3
	for _, c := range cands {
		if d := levenshtein(name, c); d < bestD && d < len(c) && d < len(name) {
			best, bestD = c, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
