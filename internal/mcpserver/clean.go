package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/stem-edu/stem/internal/termtext"
)

// cleanJSON returns v as plain JSON values with every string and object key
// passed through termtext, the way pane and buffer text is. It is for
// results assembled from text the student controls field by field (gdb's
// frames, values and breakpoint tables, the card's manifest): going through
// JSON catches every string, including those of fields added later. Numbers
// stay exact (json.Number).
func cleanJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	return cleanValue(out), nil
}

// cleanValue sanitizes the strings of a decoded JSON value.
func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return termtext.String(x)
	case []any:
		for i, e := range x {
			x[i] = cleanValue(e)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ck := termtext.String(k)
			for _, dup := out[ck]; dup; _, dup = out[ck] {
				ck += "#" // two keys that differ only in what was stripped
			}
			out[ck] = cleanValue(e)
		}
		return out
	}
	return v
}
