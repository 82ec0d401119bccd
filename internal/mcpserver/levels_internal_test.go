package mcpserver

import (
	"maps"
	"slices"
	"testing"

	"github.com/stem-edu/stem/internal/levels"
)

// stemctl reads the tools per level from package levels, and the server
// takes its ranges from the same table: every definition must have its
// entry (one per range) and every entry its definition.
func TestLevelsTableMatchesDefinitions(t *testing.T) {
	defined, listed := map[string]int{}, map[string]int{}
	for _, d := range definitions() {
		defined[d.tool.Name]++
	}
	for _, e := range levels.Tools() {
		listed[e.Name]++
	}
	for _, n := range slices.Sorted(maps.Keys(defined)) {
		if defined[n] != listed[n] {
			t.Errorf("%s: %d definitions, %d entries in levels' table", n, defined[n], listed[n])
		}
	}
	for _, n := range slices.Sorted(maps.Keys(listed)) {
		if defined[n] == 0 {
			t.Errorf("%s: in levels' table, never defined", n)
		}
	}
	for _, l := range []Level{Observe, Assist, Full} {
		if got, want := ToolNames(l), levels.ToolNames(l); !slices.Equal(got, want) {
			t.Errorf("%s: server defines %v\nlevels table says %v", l, got, want)
		}
	}
	if n := levels.ToolNames(0); len(n) != 0 {
		t.Errorf("level 0 has tools %v", n)
	}
}

// A definition takes its range from the table only: one the table does not
// name exists at no level, whatever it was built with, and a name's n-th
// entry goes to its n-th definition.
func TestWithLevelsTableDecides(t *testing.T) {
	def := func(name, desc string) toolDef {
		d := toolDef{min: Observe}
		d.tool.Name, d.tool.Description = name, desc
		return d
	}
	defs := []toolDef{def("extra", "not in the table"), def("keys", "allowed panes"), def("keys", "any pane"), def("read", "")}
	table := []levels.Tool{{Name: "read", Min: Observe}, {Name: "keys", Min: Assist, Max: Assist}, {Name: "keys", Min: Full}, {Name: "gone", Min: Observe}}
	got := withLevels(defs, table)
	if len(got) != 3 {
		t.Fatalf("got %d definitions, want 3 (read, keys twice): %+v", len(got), got)
	}
	for _, l := range []Level{Observe, Assist, Full} {
		for _, d := range got {
			if d.tool.Name == "extra" && d.at(l) {
				t.Errorf("a definition not in the table is at %s", l)
			}
		}
	}
	if got[0].tool.Name != "read" || !got[0].at(Observe) {
		t.Errorf("table order not kept: %+v", got[0])
	}
	if d := got[1]; d.tool.Description != "allowed panes" || !d.at(Assist) || d.at(Full) {
		t.Errorf("first keys entry: %q at assist %v, at full %v", d.tool.Description, d.at(Assist), d.at(Full))
	}
	if d := got[2]; d.tool.Description != "any pane" || d.at(Assist) || !d.at(Full) {
		t.Errorf("second keys entry: %q at assist %v, at full %v", d.tool.Description, d.at(Assist), d.at(Full))
	}
}
