// Package dashboard serves the class's dashboard: a local web page with
// one tile per student (name, task, state, flags, the active pane's screen
// with its colours, the last event), the students who need help first,
// updated as their screens change, and each student's page (every pane,
// the Neovim buffer, the debugger, the events), all over the class hub's
// forwarded student tools. Its only actions are the student page's hint
// and keys, when the grant has those tools, confirmed on the page and
// sent through the hub so the student's gate audits them.
//
// Threat model: every string on a tile came from a student's machine and
// is hostile. The server sends it as JSON text; the page's script puts it
// into the page only as text nodes (never as HTML), colours are classes
// the server derives from SGR numbers, and a strict Content-Security-
// Policy forbids inline script and style as a second line. An action
// needs a custom header, JSON and the page's own origin, so another page
// the teacher's browser opens cannot make it act. The page is
// the teacher's view of every student's screen: it is served on loopback
// by default and only to whoever holds the random token.
package dashboard

import (
	"slices"
	"sort"
	"sync"

	"github.com/stem-edu/stem/internal/lib/evring"
)

// Tile is one student's tile.
type Tile struct {
	Student  string   `json:"student"`
	Instance string   `json:"instance,omitempty"`
	Card     string   `json:"card,omitempty"` // SERIES/CARD of the task
	Task     string   `json:"task,omitempty"`
	State    string   `json:"state"`
	Flags    []string `json:"flags"`
	Need     int      `json:"need"` // higher: sooner; sorts the grid
	Pane     string   `json:"pane,omitempty"`
	Screen   [][]Run  `json:"screen"`
	Event    string   `json:"event,omitempty"`  // the last event, one line
	Error    string   `json:"error,omitempty"`  // why the screen is not live
	Agents   []string `json:"agents,omitempty"` // running in the instance, from the last status
	Version  int64    `json:"version"`          // the board's, when the tile last changed
}

// Board holds every student's tile; writers Update tiles, the page's
// streams wait on Changed and send what is newer than they sent.
type Board struct {
	mu      sync.Mutex
	tiles   map[string]*Tile
	version int64
	changed evring.Signal // after every change
}

// NewBoard makes a board with an empty tile for each student.
func NewBoard(students []string) *Board {
	b := &Board{tiles: map[string]*Tile{}}
	for _, s := range students {
		b.version++
		b.tiles[s] = &Tile{Student: s, State: "connecting", Flags: []string{}, Version: b.version}
	}
	return b
}

// Update changes one student's tile with f; a change that leaves the tile
// as it was is not a change (no version, nothing sent).
func (b *Board) Update(student string, f func(*Tile)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, ok := b.tiles[student]
	if !ok {
		return
	}
	t := *old
	t.Flags = append([]string(nil), old.Flags...)
	t.Agents = append([]string(nil), old.Agents...)
	f(&t)
	t.Student, t.Version = old.Student, old.Version
	if t.Flags == nil {
		t.Flags = []string{}
	}
	if equal(&t, old) {
		return
	}
	b.version++
	t.Version = b.version
	b.tiles[student] = &t
	b.changed.Broadcast()
}

func equal(a, b *Tile) bool {
	if a.Instance != b.Instance || a.Card != b.Card || a.Task != b.Task || a.State != b.State || a.Need != b.Need || a.Pane != b.Pane ||
		a.Event != b.Event || a.Error != b.Error || len(a.Flags) != len(b.Flags) || len(a.Screen) != len(b.Screen) ||
		!slices.Equal(a.Agents, b.Agents) {
		return false
	}
	for i := range a.Flags {
		if a.Flags[i] != b.Flags[i] {
			return false
		}
	}
	for i := range a.Screen {
		if len(a.Screen[i]) != len(b.Screen[i]) {
			return false
		}
		for j := range a.Screen[i] {
			if a.Screen[i][j] != b.Screen[i][j] {
				return false
			}
		}
	}
	return true
}

// Since returns the tiles changed after version v (by need, then name),
// the board's version now, and a channel closed at the next change.
func (b *Board) Since(v int64) ([]Tile, int64, <-chan struct{}) {
	changed := b.changed.C() // before reading: a change after this closes it
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Tile
	for _, t := range b.tiles {
		if t.Version > v {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Need != out[j].Need {
			return out[i].Need > out[j].Need
		}
		return out[i].Student < out[j].Student
	})
	return out, b.version, changed
}

// Has says whether student has a tile.
func (b *Board) Has(student string) bool {
	_, ok := b.Get(student)
	return ok
}

// Get is a copy of the student's tile.
func (b *Board) Get(student string) (Tile, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tiles[student]
	if !ok {
		return Tile{}, false
	}
	c := *t
	c.Flags = append([]string{}, t.Flags...)
	c.Agents = append([]string{}, t.Agents...)
	return c, true
}
