// Package tomlmsg turns the TOML decoder's type errors into messages in the
// terms of the file being edited.
package tomlmsg

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// typeErrRE matches BurntSushi/toml's message for a value of the wrong type.
var typeErrRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): incompatible types: TOML value has type (\w+); destination has type (\w+)$`)

var kinds = map[string]string{
	"string": "a string", "int64": "a number", "integer": "a number", "float64": "a number",
	"bool": "true or false", "boolean": "true or false", "slice": "a list", "array": "a list",
	"map": "a table", "struct": "a table", "datetime": "a date",
}

func kind(t string) string {
	if k, ok := kinds[t]; ok {
		return k
	}
	return t
}

// Explain rewrites a wrong-type error ("line 4 (last key "tasks.id"):
// incompatible types: TOML value has type int64; destination has type
// string") as "line 4: tasks.id must be a string, not a number (quote it: "4")".
// A field's own ValueError is put on its line the same way. Other errors
// are returned unchanged.
func Explain(err error) error { return ExplainIn(nil, err) }

// ExplainIn is Explain with the file's text, so a wrong-type error is put
// on the line of the value that has that type: the decoder reports the
// line of the last definition of the key, which for a key in an array of
// tables ([[tasks]]) is often another task's.
func ExplainIn(data []byte, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := explainValue(err); ok {
		return e
	}
	m := typeErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	want, got := kind(m[4]), kind(m[3])
	line := m[1]
	if data != nil {
		if n := findKey(data, splitKey(m[2]), func(v string) bool { return valueKind(v) == got }); n > 0 {
			line = strconv.Itoa(n)
		}
	}
	msg := fmt.Sprintf("line %s: %s must be %s, not %s", line, m[2], want, got)
	switch {
	case want == "a string" && got == "a number":
		msg += ` (put it in quotes, e.g. id = "4")`
	case want == "a list" && got == "a string":
		msg += ` (put it in brackets, e.g. ["native-amd64"])`
	}
	return errors.New(msg)
}

// valueKind is the kind of a TOML value as written, in kinds' words.
func valueKind(v string) string {
	switch {
	case v == "":
		return ""
	case v[0] == '"' || v[0] == '\'':
		return "a string"
	case v[0] == '[':
		return "a list"
	case v[0] == '{':
		return "a table"
	case strings.HasPrefix(v, "true") || strings.HasPrefix(v, "false"):
		return "true or false"
	case strings.ContainsAny(v[:1], "0123456789+-") || strings.HasPrefix(v, "inf") || strings.HasPrefix(v, "nan"):
		return "a number"
	}
	return ""
}
