package mcpserver

import (
	"maps"
	"regexp"
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

// The gate-only tools take their ranges from levels' gate table as every
// other tool takes its own from the main table: each definition has its
// entry and each entry its definition, and none of them is a tool of the
// main table (a forwarder would then offer a gate verb with no gate).
func TestGateTableMatchesDefinitions(t *testing.T) {
	got := gateTools()
	table := levels.GateTools()
	if len(got) != len(table) || len(table) == 0 {
		t.Fatalf("%d gate definitions with a range, %d entries in levels' gate table", len(got), len(table))
	}
	for i, e := range table {
		d := got[i]
		if d.tool.Name != e.Name || d.min != e.Min || d.max != e.Max {
			t.Errorf("gate tool %d: defined %s %v-%v, table says %s %v-%v", i, d.tool.Name, d.min, d.max, e.Name, e.Min, e.Max)
		}
		if levels.Known(e.Name) {
			t.Errorf("%s is in both the gate table and the main table", e.Name)
		}
	}
	// Control: without its table entry the definition exists at no level.
	for _, d := range withLevels([]toolDef{gateStatusTool()}, nil) {
		t.Errorf("%s has a range with no table entry", d.tool.Name)
	}
}

// A description that names a level (an agent reads "(full level)") must
// name the level the table gives that definition, so the text cannot
// drift from the one statement of the range.
func TestDescriptionsNameTheTablesLevel(t *testing.T) {
	for _, d := range append(allTools(), gateTools()...) {
		if bad := wrongLevelWords(d); len(bad) > 0 {
			t.Errorf("%s (%v-%v) says %q", d.tool.Name, d.min, d.max, bad)
		}
	}
	// Control: the check sees a description that names another level.
	d := toolDef{min: Assist}
	d.tool.Description = "Type keys (full level)."
	if len(wrongLevelWords(d)) == 0 {
		t.Error("an assist definition described as full level passed")
	}
}

var levelWord = regexp.MustCompile(`\b(observe|assist|full) level\b`)

func wrongLevelWords(d toolDef) []string {
	var bad []string
	for _, m := range levelWord.FindAllStringSubmatch(d.tool.Description, -1) {
		if m[1] != d.min.String() {
			bad = append(bad, m[0])
		}
	}
	return bad
}
