package statefile

import (
	"errors"
	"strings"
	"testing"
)

func TestUnmarshalNamesFileLineAndRepair(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		data string
		line int
	}{
		{"truncated", "{\n  \"schema\": 1,\n  \"instances\": {\n    \"a\": {\"instance\": \"a\"", 4},
		{"zeroed tail", "{\n  \"schema\": 1,\n\x00\x00\x00", 3},
		{"wrong type", "{\n  \"schema\": \"one\"\n}", 2},
	}
	for _, c := range cases {
		var v struct {
			Schema    int            `json:"schema"`
			Instances map[string]any `json:"instances"`
		}
		err := Unmarshal("the registry", "/s/registry.json", []byte(c.data), &v, "move it aside")
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v is not a CorruptError", c.name, err)
		}
		if ce.Line != c.line {
			t.Errorf("%s: line %d, want %d (%v)", c.name, ce.Line, c.line, err)
		}
		msg := err.Error()
		for _, want := range []string{"the registry /s/registry.json is not valid JSON", "move it aside"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", c.name, msg, want)
			}
		}
	}
	var v map[string]any
	if err := Unmarshal("x", "p", []byte(`{"a":1}`), &v, "r"); err != nil || v["a"] != 1.0 {
		t.Fatalf("valid JSON: %v %v", v, err)
	}
}
