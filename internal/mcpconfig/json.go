package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// jsonTable is the key Claude and Gemini keep MCP servers under.
const jsonTable = "mcpServers"

// jsonMember is one "key": value of an object, as byte spans.
type jsonMember struct {
	key              string
	keyStart         int
	valStart, valEnd int
	isObject         bool
	open, close      int // the value's braces when it is an object
	members          []jsonMember
	lineIndent       int // column of the key when it starts its line, else -1
}

// jsonScanner finds object members' byte spans in JSON text whose comments
// were blanked out (so offsets match the original text).
type jsonScanner struct {
	s   []byte
	pos int
}

func (p *jsonScanner) ws() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func (p *jsonScanner) str() (string, error) {
	start := p.pos
	if p.pos >= len(p.s) || p.s[p.pos] != '"' {
		return "", fmt.Errorf("expected a string at byte %d", p.pos)
	}
	for p.pos++; p.pos < len(p.s); p.pos++ {
		switch p.s[p.pos] {
		case '\\':
			p.pos++
		case '"':
			p.pos++
			var v string
			if err := json.Unmarshal(p.s[start:p.pos], &v); err != nil {
				return "", err
			}
			return v, nil
		}
	}
	return "", errors.New("unterminated string")
}

// value skips one value; for objects it returns their members (one level
// of nesting is enough for mcpServers.NAME, deeper levels are skipped).
func (p *jsonScanner) value(depth int) (members []jsonMember, isObj bool, open, close int, err error) {
	p.ws()
	if p.pos >= len(p.s) {
		return nil, false, 0, 0, errors.New("unexpected end")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		open = p.pos
		p.pos++
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			return nil, true, open, p.pos - 1, nil
		}
		for {
			p.ws()
			m := jsonMember{keyStart: p.pos}
			if m.key, err = p.str(); err != nil {
				return nil, false, 0, 0, err
			}
			p.ws()
			if p.pos >= len(p.s) || p.s[p.pos] != ':' {
				return nil, false, 0, 0, fmt.Errorf("expected ':' at byte %d", p.pos)
			}
			p.pos++
			p.ws()
			m.valStart = p.pos
			if m.members, m.isObject, m.open, m.close, err = p.value(depth + 1); err != nil {
				return nil, false, 0, 0, err
			}
			m.valEnd = p.pos
			m.lineIndent = indentOf(p.s, m.keyStart)
			members = append(members, m)
			p.ws()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.s) && p.s[p.pos] == '}' {
				p.pos++
				return members, true, open, p.pos - 1, nil
			}
			return nil, false, 0, 0, fmt.Errorf("expected ',' or '}' at byte %d", p.pos)
		}
	case c == '[':
		p.pos++
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == ']' {
			p.pos++
			return nil, false, 0, 0, nil
		}
		for {
			if _, _, _, _, err = p.value(depth + 1); err != nil {
				return nil, false, 0, 0, err
			}
			p.ws()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.s) && p.s[p.pos] == ']' {
				p.pos++
				return nil, false, 0, 0, nil
			}
			return nil, false, 0, 0, fmt.Errorf("expected ',' or ']' at byte %d", p.pos)
		}
	case c == '"':
		_, err = p.str()
		return nil, false, 0, 0, err
	default:
		for p.pos < len(p.s) && bytes.IndexByte([]byte(" \t\r\n,]}"), p.s[p.pos]) < 0 {
			p.pos++
		}
		return nil, false, 0, 0, nil
	}
}

// indentOf returns the column of the first non-blank of the line holding
// pos, when only blanks precede pos on that line; -1 otherwise.
func indentOf(s []byte, pos int) int {
	i := pos
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	if i > 0 && s[i-1] != '\n' {
		return -1
	}
	return pos - i
}

// blankComments replaces // and /* */ comments (outside strings) with
// spaces, keeping newlines, so offsets in the result match the original.
// Gemini's settings.json may hold comments.
func blankComments(in []byte) []byte {
	s := append([]byte(nil), in...)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '/':
			for ; i < len(s) && s[i] != '\n'; i++ {
				s[i] = ' '
			}
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
			j := bytes.Index(s[i+2:], []byte("*/"))
			end := len(s)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			for ; i < end; i++ {
				if s[i] != '\n' {
					s[i] = ' '
				}
			}
			i--
		}
	}
	return s
}

// parseJSONDoc returns the root object's members and braces.
func parseJSONDoc(clean []byte) (members []jsonMember, open, close int, err error) {
	p := &jsonScanner{s: clean}
	members, isObj, open, close, err := p.value(0)
	if err != nil {
		return nil, 0, 0, err
	}
	if !isObj {
		return nil, 0, 0, errors.New("the top level is not a JSON object")
	}
	p.ws()
	if p.pos != len(clean) {
		return nil, 0, 0, fmt.Errorf("trailing data at byte %d", p.pos)
	}
	return members, open, close, nil
}

// indentUnit guesses the file's indentation step (default two spaces).
func indentUnit(members []jsonMember) string {
	for _, m := range members {
		if m.lineIndent > 0 {
			return strings.Repeat(" ", m.lineIndent)
		}
	}
	return "  "
}

func render(v any, prefix, unit string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, unit)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// insertMember adds "key": v to the object spanning open..close whose
// members are ms, at nesting depth depth (root object = 0).
func insertMember(src []byte, ms []jsonMember, open, close, depth int, unit, key string, v any) ([]byte, error) {
	inner := strings.Repeat(unit, depth+1)
	val, err := render(v, inner, unit)
	if err != nil {
		return nil, err
	}
	k, _ := json.Marshal(key)
	member := string(k) + ": " + val
	var out bytes.Buffer
	if len(ms) == 0 {
		out.Write(src[:open+1])
		out.WriteString("\n" + inner + member + "\n" + strings.Repeat(unit, depth))
		out.Write(src[close:])
		return out.Bytes(), nil
	}
	last := ms[len(ms)-1]
	out.Write(src[:last.valEnd])
	if last.lineIndent < 0 {
		// A compact object stays compact.
		c, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out.WriteString("," + string(k) + ":" + string(c))
		out.Write(src[last.valEnd:])
		return out.Bytes(), nil
	}
	out.WriteString(",\n" + inner + member)
	out.Write(src[last.valEnd:])
	return out.Bytes(), nil
}

func decodeJSON(clean []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(clean, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func mergeJSON(existing []byte, e Entry, value any) ([]byte, error) {
	if len(bytes.TrimSpace(existing)) == 0 {
		existing = []byte("{}\n")
	}
	clean := blankComments(existing)
	orig, err := decodeJSON(clean)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON (%v): fix it, or add the %q entry under %q by hand", err, e.Name, jsonTable)
	}
	root, open, close, err := parseJSONDoc(clean)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON (%v)", err)
	}
	unit := indentUnit(root)
	var out []byte
	var table *jsonMember
	for i := range root {
		if root[i].key == jsonTable {
			if table != nil {
				return nil, fmt.Errorf("%q appears twice: fix the file by hand", jsonTable)
			}
			table = &root[i]
		}
	}
	switch {
	case table == nil:
		out, err = insertMember(existing, root, open, close, 0, unit, jsonTable, map[string]any{e.Name: value})
	case !table.isObject:
		return nil, fmt.Errorf("%q is not an object: fix the file by hand", jsonTable)
	default:
		var cur *jsonMember
		for i := range table.members {
			if table.members[i].key == e.Name {
				if cur != nil {
					return nil, fmt.Errorf("%s.%s appears twice: fix the file by hand", jsonTable, e.Name)
				}
				cur = &table.members[i]
			}
		}
		if cur == nil {
			out, err = insertMember(existing, table.members, table.open, table.close, 1, unit, e.Name, value)
		} else {
			var val string
			if cur.lineIndent < 0 {
				var c []byte
				c, err = json.Marshal(value)
				val = string(c)
			} else {
				val, err = render(value, strings.Repeat(unit, 2), unit)
			}
			if err == nil {
				out = append(append(append([]byte(nil), existing[:cur.valStart]...), val...), existing[cur.valEnd:]...)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	got, err := decodeJSON(blankComments(out))
	if err != nil {
		return nil, fmt.Errorf("merge produced invalid JSON (%v): add the entry by hand", err)
	}
	want, _ := json.Marshal(value)
	var wantV any
	_ = json.Unmarshal(want, &wantV)
	servers, _ := got[jsonTable].(map[string]any)
	if !reflect.DeepEqual(servers[e.Name], wantV) {
		return nil, fmt.Errorf("merge did not produce the %s.%s entry: add it by hand", jsonTable, e.Name)
	}
	if !reflect.DeepEqual(withoutEntry(orig, jsonTable, e.Name), withoutEntry(got, jsonTable, e.Name)) {
		return nil, fmt.Errorf("merging %s.%s would change other settings: add it by hand", jsonTable, e.Name)
	}
	return out, nil
}

func removeJSON(existing []byte, name string) ([]byte, bool, error) {
	if len(bytes.TrimSpace(existing)) == 0 {
		return existing, false, nil
	}
	clean := blankComments(existing)
	orig, err := decodeJSON(clean)
	if err != nil {
		return nil, false, fmt.Errorf("not valid JSON: %w", err)
	}
	root, _, _, err := parseJSONDoc(clean)
	if err != nil {
		return nil, false, fmt.Errorf("not valid JSON: %w", err)
	}
	for _, t := range root {
		if t.key != jsonTable || !t.isObject {
			continue
		}
		for i, m := range t.members {
			if m.key != name {
				continue
			}
			// Cut from the end of the previous member (or the brace) to the
			// end of this one, taking the separating comma with it.
			from, to := t.open+1, m.valEnd
			if i > 0 {
				from = t.members[i-1].valEnd
			} else if len(t.members) > 1 {
				from, to = m.keyStart, t.members[1].keyStart
			}
			out := append(append([]byte(nil), existing[:from]...), existing[to:]...)
			got, err := decodeJSON(blankComments(out))
			if err != nil || !reflect.DeepEqual(got, withoutEntryKeep(orig, name)) {
				return nil, false, fmt.Errorf("cannot remove %s.%s safely: edit the file by hand", jsonTable, name)
			}
			return out, true, nil
		}
	}
	return existing, false, nil
}

// withoutEntryKeep removes mcpServers.name but keeps an empty mcpServers.
func withoutEntryKeep(m map[string]any, name string) map[string]any {
	out := withoutEntry(m, jsonTable, name)
	if _, ok := out[jsonTable]; !ok {
		if _, had := m[jsonTable]; had {
			out[jsonTable] = map[string]any{}
		}
	}
	return out
}
