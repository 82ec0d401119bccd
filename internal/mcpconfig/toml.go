package mcpconfig

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// codexTable is Codex's table of MCP servers.
const codexTable = "mcp_servers"

// tomlBlock renders e as a [mcp_servers.NAME] table.
func tomlBlock(e Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s.%s]\n", codexTable, TOMLKey(e.Name))
	fmt.Fprintf(&b, "command = %s\n", TOMLString(e.Command))
	fmt.Fprintf(&b, "args = %s\n", TOMLArray(e.Args))
	if len(e.Env) > 0 {
		fmt.Fprintf(&b, "env = %s\n", TOMLInline(e.Env))
	}
	return b.String()
}

// TOML values and keys as the TOML library writes them (escapes included):
// for Codex's config.toml here and its -c options (package agent).

// TOMLString is s as a TOML basic string.
func TOMLString(s string) string { return tomlValue(s) }

// TOMLArray is a as a TOML array of strings.
func TOMLArray(a []string) string {
	if a == nil {
		a = []string{}
	}
	return tomlValue(a)
}

// TOMLKey is k as a TOML key: bare when it may be, else quoted.
func TOMLKey(k string) string {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(map[string]int{k: 0}); err != nil {
		panic(fmt.Sprintf("toml: encode a key: %v", err)) // cannot fail for a string key
	}
	return strings.TrimSuffix(b.String(), " = 0\n")
}

// TOMLInline is m as a TOML inline table, keys sorted (the library has no
// inline form for a map value).
func TOMLInline(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = TOMLKey(k) + " = " + TOMLString(m[k])
	}
	if len(pairs) == 0 {
		return "{}"
	}
	return "{ " + strings.Join(pairs, ", ") + " }"
}

// tomlValue renders a string or a list of strings, which cannot fail.
func tomlValue(v any) string {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(struct {
		V any `toml:"v"`
	}{v}); err != nil {
		panic(fmt.Sprintf("toml: encode %T: %v", v, err))
	}
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "v = "), "\n")
}

// tomlSection is a span of the file starting at a table header (or the
// top of the file, header == nil).
type tomlSection struct {
	start, end int      // byte span; end excludes trailing blank/comment lines
	header     []string // key path of the header
}

// tomlSections splits data at table headers, skipping "headers" inside
// multi-line strings.
func tomlSections(data []byte) []tomlSection {
	var secs []tomlSection
	cur := tomlSection{start: 0}
	lastContent := 0 // end of the last non-blank, non-comment line
	state := 0       // 0 none, 1 inside """, 2 inside '''
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		end := len(data)
		if nl >= 0 {
			end = off + nl + 1
		}
		line := string(data[off:end])
		trimmed := strings.TrimSpace(line)
		if state == 0 && strings.HasPrefix(trimmed, "[") {
			if path, ok := parseTOMLHeader(trimmed); ok {
				cur.end = lastContent
				if cur.end < cur.start {
					cur.end = cur.start
				}
				secs = append(secs, cur)
				cur = tomlSection{start: off, header: path}
			}
		}
		if state != 0 || (trimmed != "" && !strings.HasPrefix(trimmed, "#")) {
			lastContent = end
		}
		state = scanTOMLLine(line, state)
		off = end
	}
	cur.end = lastContent
	if cur.end < cur.start {
		cur.end = cur.start
	}
	return append(secs, cur)
}

// scanTOMLLine tracks whether a multi-line string is open after line.
func scanTOMLLine(line string, state int) int {
	for i := 0; i < len(line); i++ {
		switch state {
		case 1:
			if line[i] == '\\' {
				i++
			} else if strings.HasPrefix(line[i:], `"""`) {
				state, i = 0, i+2
			}
		case 2:
			if strings.HasPrefix(line[i:], `'''`) {
				state, i = 0, i+2
			}
		default:
			switch {
			case line[i] == '#':
				return 0
			case strings.HasPrefix(line[i:], `"""`):
				state, i = 1, i+2
			case strings.HasPrefix(line[i:], `'''`):
				state, i = 2, i+2
			case line[i] == '"':
				for i++; i < len(line) && line[i] != '"'; i++ {
					if line[i] == '\\' {
						i++
					}
				}
			case line[i] == '\'':
				for i++; i < len(line) && line[i] != '\''; i++ {
				}
			}
		}
	}
	return state
}

// parseTOMLHeader reads "[a.b."c"]" or "[[a.b]]" (with an optional
// trailing comment) into its key path.
func parseTOMLHeader(s string) ([]string, bool) {
	s = strings.TrimPrefix(s, "[")
	double := strings.HasPrefix(s, "[")
	if double {
		s = s[1:]
	}
	var path []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, false
		}
		var key string
		switch s[0] {
		case '"':
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return nil, false
			}
			k, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return nil, false
			}
			key, s = k, s[i+1:]
		case '\'':
			i := strings.IndexByte(s[1:], '\'')
			if i < 0 {
				return nil, false
			}
			key, s = s[1:i+1], s[i+2:]
		default:
			i := 0
			for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_' || s[i] == '-') {
				i++
			}
			if i == 0 {
				return nil, false
			}
			key, s = s[:i], s[i:]
		}
		path = append(path, key)
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, ".") {
			s = s[1:]
			continue
		}
		closer := "]"
		if double {
			closer = "]]"
		}
		if !strings.HasPrefix(s, closer) {
			return nil, false
		}
		rest := strings.TrimSpace(s[len(closer):])
		if rest != "" && !strings.HasPrefix(rest, "#") {
			return nil, false
		}
		return path, true
	}
}

func isEntryHeader(path []string, name string) bool {
	return len(path) >= 2 && path[0] == codexTable && path[1] == name
}

// spliceTOML removes every section of entry name and puts block (if not
// empty) where the first one was, or at the end.
func spliceTOML(data []byte, name, block string) ([]byte, bool) {
	var out bytes.Buffer
	placed, found, sep := false, false, false
	keep := func(b []byte) {
		if sep && len(b) > 0 {
			out.WriteByte('\n') // a blank line between the new block and what follows
			sep = false
		}
		out.Write(b)
	}
	prev := 0
	for _, sec := range tomlSections(data) {
		if sec.header == nil || !isEntryHeader(sec.header, name) {
			continue
		}
		found = true
		keep(data[prev:sec.start])
		if !placed && block != "" {
			out.WriteString(block)
			placed, sep = true, true
		}
		// Blank lines after a removed table go with it.
		prev = sec.end
		for prev < len(data) {
			nl := bytes.IndexByte(data[prev:], '\n')
			if nl < 0 || len(bytes.TrimSpace(data[prev:prev+nl])) != 0 {
				break
			}
			prev += nl + 1
		}
	}
	keep(data[prev:])
	if !placed && block != "" {
		b := out.Bytes()
		if len(b) > 0 && b[len(b)-1] != '\n' {
			out.WriteByte('\n')
		}
		if len(bytes.TrimSpace(b)) > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(block)
	}
	return out.Bytes(), found
}

func decodeTOML(data []byte) (map[string]any, error) {
	m := map[string]any{}
	if _, err := toml.Decode(string(data), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// withoutEntry returns m with mcp_servers.name removed (and mcp_servers
// itself when that leaves it empty).
func withoutEntry(m map[string]any, table, name string) map[string]any {
	servers, ok := m[table].(map[string]any)
	if !ok {
		return m
	}
	cp := make(map[string]any, len(servers))
	for k, v := range servers {
		if k != name {
			cp[k] = v
		}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	if len(cp) == 0 {
		delete(out, table)
	} else {
		out[table] = cp
	}
	return out
}

func mergeTOML(existing []byte, e Entry) ([]byte, error) {
	orig, err := decodeTOML(existing)
	if err != nil {
		return nil, fmt.Errorf("not valid TOML (%v): fix it, or add the [mcp_servers.%s] table by hand", err, e.Name)
	}
	out, _ := spliceTOML(existing, e.Name, tomlBlock(e))
	got, err := decodeTOML(out)
	if err != nil {
		return nil, fmt.Errorf("mcp_servers.%s is defined in a form this tool does not edit (inline or dotted keys): remove it by hand or choose another --name (%v)", e.Name, err)
	}
	if err := checkTOMLEntry(got, e); err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(withoutEntry(orig, codexTable, e.Name), withoutEntry(got, codexTable, e.Name)) {
		return nil, fmt.Errorf("merging mcp_servers.%s would change other settings (the file has a layout this tool does not edit safely): add the table by hand", e.Name)
	}
	return out, nil
}

func checkTOMLEntry(m map[string]any, e Entry) error {
	servers, _ := m[codexTable].(map[string]any)
	got, _ := servers[e.Name].(map[string]any)
	want, err := decodeTOML([]byte(tomlBlock(e)))
	if err != nil {
		return fmt.Errorf("render mcp_servers.%s: %w", e.Name, err)
	}
	if !reflect.DeepEqual(got, want[codexTable].(map[string]any)[e.Name]) {
		return fmt.Errorf("mcp_servers.%s is also defined elsewhere in the file (inline or dotted keys): remove it by hand or choose another --name", e.Name)
	}
	return nil
}

func removeTOML(existing []byte, name string) ([]byte, bool, error) {
	orig, err := decodeTOML(existing)
	if err != nil {
		return nil, false, fmt.Errorf("not valid TOML: %w", err)
	}
	servers, _ := orig[codexTable].(map[string]any)
	if _, ok := servers[name]; !ok {
		return existing, false, nil
	}
	out, _ := spliceTOML(existing, name, "")
	got, err := decodeTOML(out)
	if err == nil && reflect.DeepEqual(got, withoutEntry(orig, codexTable, name)) {
		return out, true, nil
	}
	return nil, false, fmt.Errorf("mcp_servers.%s is defined in a form this tool does not edit (inline or dotted keys): remove it by hand", name)
}
