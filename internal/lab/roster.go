package lab

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stem-edu/stem/internal/class"
)

// RosterPath is the lab's roster: the accounts lab prepared, as rows of
// `stemctl class import` (name,USER@HOST).
func RosterPath(dir string) string { return filepath.Join(dir, "roster.csv") }

// ReadRoster returns the roster's rows (none when there is no file).
func ReadRoster(dir string) ([]class.Student, error) {
	p := RosterPath(dir)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(bytes.TrimPrefix(data, []byte("name,host")))) == 0 {
		return nil, nil
	}
	return class.ReadCSV(p, bytes.NewReader(data))
}

func writeRoster(dir string, rows []class.Student) error {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"name", "host"})
	for _, r := range rows {
		w.Write([]string{r.Name, r.Host})
	}
	w.Flush()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".roster-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), RosterPath(dir))
}

func addToRoster(o *Options, name string) Step {
	st := Step{Account: name, Name: "roster"}
	rows, err := ReadRoster(o.Dir)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	host := name + "@" + o.Host
	for _, r := range rows {
		if r.Name == name && r.Host == host {
			st.Result, st.Detail = Already, host+" in "+RosterPath(o.Dir)
			return st
		}
	}
	kept := rows[:0]
	for _, r := range rows {
		if r.Name != name {
			kept = append(kept, r)
		}
	}
	if err := writeRoster(o.Dir, append(kept, class.Student{Name: name, Host: host})); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, host+" in "+RosterPath(o.Dir)
	return st
}

func dropFromRoster(dir, name string) error {
	rows, err := ReadRoster(dir)
	if err != nil {
		return err
	}
	kept := rows[:0]
	for _, r := range rows {
		if r.Name != name {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(rows) {
		return nil
	}
	return writeRoster(dir, kept)
}

// ReadStudents reads an enrolment CSV: name[,full name[,email]] a row,
// an optional header row starting with "name", # comments. It reports
// every bad row.
func ReadStudents(path string, r io.Reader) ([]Student, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%s: larger than 1 MiB: is this a class list?", path)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var out []Student
	var problems []string
	seen := map[string]int{}
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		if first && strings.EqualFold(strings.TrimSpace(rec[0]), "name") {
			continue
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) > 3 {
			problems = append(problems, fmt.Sprintf("line %d: %d columns; a row is name[,full name[,email]]", line, len(rec)))
			continue
		}
		for len(rec) < 3 {
			rec = append(rec, "")
		}
		s := Student{Name: strings.TrimSpace(rec[0]), FullName: strings.TrimSpace(rec[1]), Email: strings.TrimSpace(rec[2])}
		if err := ValidName(s.Name); err != nil {
			problems = append(problems, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		if strings.ContainsAny(s.FullName, ":\n") || strings.ContainsAny(s.Email, ": \n") {
			problems = append(problems, fmt.Sprintf("line %d: a full name or email may not hold ':' (the passwd file's separator)", line))
			continue
		}
		if l, ok := seen[s.Name]; ok {
			problems = append(problems, fmt.Sprintf("line %d: %s is already on line %d", line, s.Name, l))
			continue
		}
		seen[s.Name] = line
		out = append(out, s)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: nothing enrolled; fix these and run it again:\n  %s", path, strings.Join(problems, "\n  "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no students in it: one row per student, name[,full name[,email]]", path)
	}
	return out, nil
}
