package mcpserver

import "github.com/stem-edu/stem/internal/levels"

// definitions returns every tool definition, grouped by the file that
// holds it; the order here says nothing about levels. A name defined more
// than once (one behaviour per level range) lists its definitions lowest
// range first, as levels' table does.
func definitions() []toolDef {
	var out []toolDef
	out = append(out, sessionTools()...)
	out = append(out, paneReadTools()...)
	out = append(out, nvimReadTools()...)
	out = append(out, blameTools()...)
	out = append(out, gdbStatusTools()...)
	out = append(out, eventTools()...)
	out = append(out, nvimEditTools()...)
	out = append(out, proposalTools()...)
	out = append(out, sendKeysTools()...)
	out = append(out, gdbControlTools()...)
	out = append(out, taskActionTools()...)
	out = append(out, nvimFreeTextTools()...)
	out = append(out, paneRunTools()...)
	out = append(out, gdbCommandTools()...)
	return out
}

// allTools returns the definitions in levels' table order, each with the
// level range the table gives it: the table is the one statement of which
// level has which tool. The n-th entry of a name takes the n-th definition
// of that name. A definition the table does not name gets no range and is
// left out, so it exists at no level; TestLevelsTableMatchesDefinitions
// holds the two equal.
func allTools() []toolDef { return withLevels(definitions(), levels.Tools()) }

func withLevels(defs []toolDef, table []levels.Tool) []toolDef {
	byName := map[string][]toolDef{}
	for _, d := range defs {
		byName[d.tool.Name] = append(byName[d.tool.Name], d)
	}
	var out []toolDef
	for _, t := range table {
		named := byName[t.Name]
		if len(named) == 0 {
			continue
		}
		d := named[0]
		byName[t.Name] = named[1:]
		d.min, d.max = t.Min, t.Max
		out = append(out, d)
	}
	return out
}
