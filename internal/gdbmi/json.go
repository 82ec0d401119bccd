package gdbmi

import "strconv"

// Plain turns an MI value into plain JSON-able data: a const becomes a
// string, a tuple an object (a repeated name keeps its first value and the
// rest under "name#2", ...), a list an array (a list of results becomes an
// array of one-field objects).
func (v Value) Plain() any {
	switch v.Kind {
	case ValueTuple:
		return FieldsPlain(v.Fields)
	case ValueList:
		out := make([]any, 0, len(v.Items)+len(v.Fields))
		for _, it := range v.Items {
			out = append(out, it.Plain())
		}
		for _, f := range v.Fields {
			out = append(out, map[string]any{f.Name: f.Value.Plain()})
		}
		return out
	}
	return v.Const
}

// FieldsPlain turns result fields into an object (see Value.Plain).
func FieldsPlain(fs []Field) map[string]any {
	m := make(map[string]any, len(fs))
	for _, f := range fs {
		name := f.Name
		for n := 2; ; n++ {
			if _, dup := m[name]; !dup {
				break
			}
			name = f.Name + "#" + strconv.Itoa(n)
		}
		m[name] = f.Value.Plain()
	}
	return m
}
