package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

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
		// Keys that were already clean keep their names; a key that
		// becomes equal to another when cleaned gets "#" suffixes, in
		// sorted order so the result does not depend on map order.
		out := make(map[string]any, len(x))
		var changed []string
		for k, e := range x {
			if ck := termtext.String(k); ck == k {
				out[k] = cleanValue(e)
			} else {
				changed = append(changed, k)
			}
		}
		slices.Sort(changed)
		for _, k := range changed {
			ck := termtext.String(k)
			for _, dup := out[ck]; dup; _, dup = out[ck] {
				ck += "#"
			}
			out[ck] = cleanValue(x[k])
		}
		return out
	}
	return v
}
