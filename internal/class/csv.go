package class

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxImportErrors bounds the problems ReadCSV lists before it stops.
const maxImportErrors = 20

// ImportError lists every problem of an import file; nothing was added.
type ImportError struct{ Problems []error }

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nothing imported; fix these and run it again:")
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}

// ReadCSV reads students from a CSV file: one student a row, columns name,
// host (USER@HOST) and an optional port. A first row "name,host[,port]" is
// a header; lines starting with # are comments. It reports every bad row
// (up to 20), with its line, rather than the first one only.
func ReadCSV(path string, r io.Reader) ([]Student, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRosterBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxRosterBytes {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("larger than %d bytes: is this a class list?", maxRosterBytes)}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a spreadsheet's byte-order mark
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var out []Student
	var problems []error
	seen := map[string]int{}
	first := true
	for len(problems) < maxImportErrors {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				problems = append(problems, &FileError{Path: path, Line: pe.Line, Msg: pe.Err.Error() + ` (quote a field with " if it holds a comma)`})
				break // the reader cannot be trusted to resynchronise
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if first {
			first = false
			if len(rec) >= 2 && strings.EqualFold(rec[0], "name") && strings.EqualFold(rec[1], "host") {
				continue
			}
		}
		if len(rec) == 1 && rec[0] == "" {
			continue
		}
		bad := func(format string, args ...any) {
			problems = append(problems, &FileError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
		}
		if len(rec) < 2 || len(rec) > 3 {
			bad("%d columns; a row is name,host or name,host,port (e.g. anna,anna@lab-03,22)", len(rec))
			continue
		}
		s := Student{Name: rec[0], Host: rec[1], Line: line}
		if len(rec) == 3 {
			p, err := ParsePort(rec[2])
			if err != nil {
				bad("%v", err)
				continue
			}
			s.Port = p
		}
		if err := checkStudent(s); err != nil {
			bad("%v", err)
			continue
		}
		if l, ok := seen[strings.ToLower(s.Name)]; ok {
			bad("student %s is already on line %d", s.Name, l)
			continue
		}
		seen[strings.ToLower(s.Name)] = line
		out = append(out, s)
	}
	if len(problems) > 0 {
		return nil, &ImportError{Problems: problems}
	}
	if len(out) == 0 {
		return nil, &FileError{Path: path, Msg: "no students in it: write one row per student, name,host[,port]"}
	}
	return out, nil
}
