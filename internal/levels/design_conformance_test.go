package levels

// Conformance with the design contract's "Access levels": exactly three
// levels, each a separate allowlist that contains the one below it, free-form
// Ex/Lua/gdb/shell only at full, and docs/security.md's tool table (what
// students and teachers read) naming exactly the tools of each level.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestDesignExactlyThreeLevels(t *testing.T) {
	for _, c := range []struct {
		name string
		l    Level
	}{{"observe", Observe}, {"assist", Assist}, {"full", Full}} {
		got, err := Parse(c.name)
		if err != nil || got != c.l || got.String() != c.name {
			t.Errorf("Parse(%q) = %v %v", c.name, got, err)
		}
	}
	// Anything else, including what a client might try, is not a level.
	for _, s := range []string{"", "Observe", "FULL", " full", "full ", "admin", "root", "level=full", "0", "3", "observe,full"} {
		if l, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted as %v", s, l)
		}
	}
}

func TestDesignLevelsAreNestedAllowlists(t *testing.T) {
	obs, as, full := ToolNames(Observe), ToolNames(Assist), ToolNames(Full)
	if len(obs) == 0 || len(as) <= len(obs) || len(full) <= len(as) {
		t.Fatalf("levels do not grow: observe %d, assist %d, full %d tools", len(obs), len(as), len(full))
	}
	for _, n := range obs {
		if !slices.Contains(as, n) {
			t.Errorf("observe tool %s is missing at assist", n)
		}
	}
	for _, n := range as {
		if !slices.Contains(full, n) {
			t.Errorf("assist tool %s is missing at full", n)
		}
	}
	// The tools that take free-form Ex, Lua, gdb or shell text exist only
	// at full (the design's bypass routes).
	for _, n := range []string{"nvim_command", "nvim_lua", "gdb_command", "pane_run"} {
		if slices.Contains(as, n) || !slices.Contains(full, n) {
			t.Errorf("%s: at assist %v, at full %v; want full only", n, slices.Contains(as, n), slices.Contains(full, n))
		}
	}
	// observe: no edits, no keys, no debugger actions.
	for _, n := range obs {
		for _, bad := range []string{"edit", "send_keys", "run", "open", "break", "continue", "step", "action", "command", "lua"} {
			if strings.Contains(n, bad) {
				t.Errorf("observe has %s, which looks like an action (%q)", n, bad)
			}
		}
	}
}

// TestDesignSecurityDocToolTable holds docs/security.md's "Access levels"
// table to the code: each row's tools (plus the row above it, for
// "observe + ...", "assist + ...") are exactly ToolNames of that level.
func TestDesignSecurityDocToolTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([a-z_]+)`")
	rows := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		for _, l := range []string{"observe", "assist", "full"} {
			if !strings.HasPrefix(line, "| "+l+" | ") {
				continue
			}
			cells := strings.Split(line, "|")
			if len(cells) < 4 {
				t.Fatalf("row %q has no tools cell", line)
			}
			var names []string
			for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
				names = append(names, m[1])
			}
			rows[l] = names
		}
	}
	prev := []string(nil)
	for _, l := range []Level{Observe, Assist, Full} {
		row, ok := rows[l.String()]
		if !ok {
			t.Fatalf("docs/security.md has no table row for %s", l)
		}
		doc := map[string]bool{}
		for _, n := range append(append([]string{}, prev...), row...) {
			doc[n] = true
		}
		var docNames []string
		for n := range doc {
			docNames = append(docNames, n)
		}
		code := map[string]bool{}
		for _, n := range ToolNames(l) {
			code[n] = true
		}
		var codeNames []string
		for n := range code {
			codeNames = append(codeNames, n)
		}
		sort.Strings(docNames)
		sort.Strings(codeNames)
		if !slices.Equal(docNames, codeNames) {
			t.Errorf("docs/security.md lists for %s:\n  %v\nthe server has:\n  %v", l, docNames, codeNames)
		}
		prev = codeNames
	}
}
