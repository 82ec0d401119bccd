// Package statefile explains a damaged JSON state file (a registry, a grants
// file, an agent record) in one shape: which file, where it stops being JSON,
// and the one thing to do. A file truncated by a full disk or a crash of
// another program must end in that message, never in a panic or in a
// decoder's bare "unexpected end of JSON input".
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// CorruptError is a state file that does not decode.
type CorruptError struct {
	What   string // "the registry", "the grants file"
	Path   string
	Line   int // 1-based; 0 when unknown
	Err    error
	Repair string // what the user does, with the command
}

func (e *CorruptError) Error() string {
	where := ""
	if e.Line > 0 {
		where = fmt.Sprintf(" (line %d: %v)", e.Line, e.Err)
	} else if e.Err != nil {
		where = fmt.Sprintf(" (%v)", e.Err)
	}
	return fmt.Sprintf("%s %s is not valid JSON%s: %s", e.What, e.Path, where, e.Repair)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Unmarshal decodes data (read from path) into v; a decode error becomes a
// *CorruptError carrying the line it was found on and repair.
func Unmarshal(what, path string, data []byte, v any, repair string) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	return &CorruptError{What: what, Path: path, Line: Line(data, err), Err: err, Repair: repair}
}

// Line returns the 1-based line of the byte offset a json error reports,
// or 0 when it reports none.
func Line(data []byte, err error) int {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		return 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// MoveAside is the shell command that keeps a damaged file for inspection
// and gets it out of the way.
func MoveAside(path string) string {
	return fmt.Sprintf("`mv %s %s.damaged`", path, path)
}
