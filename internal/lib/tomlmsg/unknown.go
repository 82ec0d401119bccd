package tomlmsg

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// Unknown explains keys the decoder did not use (md.Undecoded()) against
// the type decoded into: each with its line in data and, when a known key
// of the same table is close, what was meant —
// `line 7: unknown key defaults.bulid (did you mean "build"?)`.
// It returns "" when there are none.
func Unknown(data []byte, into any, keys []toml.Key) string {
	if len(keys) == 0 {
		return ""
	}
	var parts []string
	for _, k := range keys {
		msg := "unknown key " + k.String()
		if len(k) > 0 {
			if s := suggest(k[len(k)-1], knownKeys(reflect.TypeOf(into), k[:len(k)-1])); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		if line := KeyLine(data, k); line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// knownKeys is the keys the table at path takes in t (nil when the table
// is a map or unknown).
func knownKeys(t reflect.Type, path toml.Key) []string {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
			continue
		}
		break
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			if f.Anonymous {
				names = append(names, knownKeys(f.Type, nil)...)
				continue
			}
			name = f.Name
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	if len(path) == 0 {
		return names
	}
	ft, ok := fields[path[0]]
	if !ok {
		return nil
	}
	return knownKeys(ft, path[1:])
}

// suggest is the known key closest to k, if it is close (at most two
// edits, and fewer than half of k's letters).
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if d := distance(strings.ToLower(k), strings.ToLower(c)); d < bestD && d*2 < len(k) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance with adjacent transpositions.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// KeyLine is the 1-based line of key's first definition in data, found
// by reading the file's table headers and keys (0 when not found). It
// serves messages only, so a simple reading is enough: headers [a.b] and
// [[a.b]], and keys, bare or quoted, dotted or not, at a line's start.
func KeyLine(data []byte, key toml.Key) int {
	return findKey(data, key, nil)
}

// findKey is KeyLine for the first line whose value also satisfies ok.
func findKey(data []byte, key toml.Key, ok func(value string) bool) int {
	var table []string
	for i, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		if l == "" || l[0] == '#' {
			continue
		}
		if l[0] == '[' {
			h := strings.TrimSpace(strings.Trim(strings.SplitN(l, "#", 2)[0], " \t"))
			h = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
			h = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
			table = splitKey(h)
			// A table header names a key too ([tasks.debugger]).
			if ok == nil && equalKey(table, key) {
				return i + 1
			}
			continue
		}
		name, value, found := strings.Cut(l, "=")
		if !found {
			continue
		}
		full := append(append([]string{}, table...), splitKey(strings.TrimSpace(name))...)
		if equalKey(full, key) && (ok == nil || ok(strings.TrimSpace(value))) {
			return i + 1
		}
	}
	return 0
}

func splitKey(s string) []string {
	var parts []string
	for _, p := range strings.Split(s, ".") {
		parts = append(parts, strings.Trim(strings.TrimSpace(p), `"'`))
	}
	return parts
}

func equalKey(a []string, b toml.Key) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
