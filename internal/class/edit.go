package class

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/sockets"
)

// Settings are a class's defaults for every student.
type Settings struct {
	Key        string
	SSHOptions []string
}

// Init creates an empty roster for class name. It never overwrites one.
func Init(ctx context.Context, configDir, name string, s Settings) (*Roster, error) {
	if err := ValidClassName(name); err != nil {
		return nil, err
	}
	if err := checkSSHOptions(s.SSHOptions); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# stem class %s: one [student.NAME] table per student.\n", name)
	b.WriteString("# host is the student's USER@HOST; port and key (the automation key, when not\n")
	b.WriteString("# the one below) are optional. Edit by hand or with stemctl class add|import|rm.\n")
	if s.Key != "" {
		fmt.Fprintf(&b, "key = %s\n", mcpconfig.TOMLString(s.Key))
	}
	if len(s.SSHOptions) > 0 {
		fmt.Fprintf(&b, "ssh_options = %s\n", mcpconfig.TOMLArray(s.SSHOptions))
	}
	path := Path(configDir, name)
	var r *Roster
	err := locked(ctx, configDir, name, func() error {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("class %s already exists (%s): add students with `stemctl class add %s USER@HOST`", name, path, name)
		}
		var err error
		if r, err = Parse(name, path, []byte(b.String())); err != nil {
			return err
		}
		return sockets.WriteFileAtomic(path, r.data, 0o600)
	})
	return r, err
}

// Add appends students to class name's roster, keeping the file as
// written. Nothing is written unless every new student is valid and none
// duplicates another (in the roster or among them).
func Add(ctx context.Context, configDir, name string, add []Student) (*Roster, error) {
	return addFrom(ctx, configDir, name, "", add)
}

// Import is Add for the students of an import file (ReadCSV): every
// problem is reported, with the file's line, and nothing is added.
func Import(ctx context.Context, configDir, name, file string, add []Student) (*Roster, error) {
	return addFrom(ctx, configDir, name, file, add)
}

func addFrom(ctx context.Context, configDir, name, file string, add []Student) (*Roster, error) {
	return update(ctx, configDir, name, func(r *Roster) ([]byte, error) {
		var problems []error
		bad := func(s Student, err error) {
			if file != "" {
				err = &FileError{Path: file, Line: s.Line, Msg: err.Error()}
			}
			problems = append(problems, err)
		}
		byName := map[string]Student{}
		byDest := map[string]Student{}
		for _, s := range r.Students {
			byName[strings.ToLower(s.Name)] = s
			byDest[destKey(s)] = s
		}
		given := map[string]bool{}
		for _, s := range add {
			if err := checkStudent(s); err != nil {
				bad(s, err)
				continue
			}
			n := strings.ToLower(s.Name)
			if given[n] {
				bad(s, fmt.Errorf("student %s is given twice", s.Name))
				continue
			}
			given[n] = true
			if o, ok := byName[n]; ok {
				where := r.Path
				if o.Line > 0 {
					where = fmt.Sprintf("line %d of %s", o.Line, r.Path)
				}
				bad(s, fmt.Errorf("class %s already has a student %s (%s, %s): choose another name (--as), or first `stemctl class rm %s %s`", r.Name, o.Name, o.Dest(), where, r.Name, o.Name))
				continue
			}
			if o, ok := byDest[destKey(s)]; ok {
				bad(s, fmt.Errorf("student %s would reach %s, as %s does already: one account is one student", s.Name, s.Dest(), o.Name))
				continue
			}
			byDest[destKey(s)] = s
		}
		if len(r.Students)+len(add) > MaxStudents {
			problems = append(problems, fmt.Errorf("class %s would have %d students; a class holds at most %d", r.Name, len(r.Students)+len(add), MaxStudents))
		}
		switch {
		case len(problems) == 1 && file == "":
			return nil, problems[0]
		case len(problems) > 0:
			return nil, &ImportError{Problems: problems}
		}
		out := bytes.Clone(r.data)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		for _, s := range add {
			out = append(out, studentBlock(s)...)
		}
		return out, nil
	})
}

func destKey(s Student) string { return strings.ToLower(s.Host) + ":" + strconv.Itoa(s.Port) }

// studentBlock is s as a [student.NAME] table.
func studentBlock(s Student) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n[student.%s]\nhost = %s\n", mcpconfig.TOMLKey(s.Name), mcpconfig.TOMLString(s.Host))
	if s.Port != 0 {
		fmt.Fprintf(&b, "port = %d\n", s.Port)
	}
	if s.Key != "" {
		fmt.Fprintf(&b, "key = %s\n", mcpconfig.TOMLString(s.Key))
	}
	return b.String()
}

var tableHeaderRE = regexp.MustCompile(`^\s*\[`)

// RemoveStudent deletes one student's table from the roster, keeping the
// rest of the file as written (comments above the next table stay with it).
func RemoveStudent(ctx context.Context, configDir, name, student string) (*Roster, error) {
	return update(ctx, configDir, name, func(r *Roster) ([]byte, error) {
		i := slices.IndexFunc(r.Students, func(s Student) bool { return s.Name == student })
		if i < 0 {
			return nil, fmt.Errorf("class %s has no student %q (see `stemctl class list %s`)", r.Name, student, r.Name)
		}
		s := r.Students[i]
		manual := fmt.Errorf("cannot find where student %s's table starts and ends in %s: delete it there by hand", s.Name, r.Path)
		if s.Line == 0 {
			return nil, manual
		}
		lines := strings.SplitAfter(string(r.data), "\n")
		start, end := s.Line-1, len(lines)
		for j := start + 1; j < len(lines); j++ {
			if tableHeaderRE.MatchString(lines[j]) {
				end = j
				break
			}
		}
		for end < len(lines) && end > start+1 && isCommentOrBlank(lines[end-1]) {
			end--
		}
		// The blank line studentBlock puts before a table goes with it.
		if start > 0 && strings.TrimSpace(lines[start-1]) == "" {
			start--
		}
		out := []byte(strings.Join(append(slices.Clone(lines[:start]), lines[end:]...), ""))
		// The edit is checked by parsing: the student is gone and nothing
		// else changed, or nothing is written.
		got, err := Parse(r.Name, r.Path, out)
		if err != nil {
			return nil, manual
		}
		want := slices.Delete(slices.Clone(r.Students), i, i+1)
		if !sameStudents(got.Students, want) || got.Key != r.Key || !slices.Equal(got.SSHOptions, r.SSHOptions) {
			return nil, manual
		}
		return out, nil
	})
}

func isCommentOrBlank(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || strings.HasPrefix(t, "#")
}

func sameStudents(a, b []Student) bool {
	return slices.EqualFunc(a, b, func(x, y Student) bool {
		return x.Name == y.Name && x.Host == y.Host && x.Port == y.Port && x.Key == y.Key
	})
}

// RemoveClass deletes class name's roster.
func RemoveClass(ctx context.Context, configDir, name string) error {
	if err := ValidClassName(name); err != nil {
		return err
	}
	return locked(ctx, configDir, name, func() error {
		path := Path(configDir, name)
		if err := os.Remove(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no class %q (no %s): see `stemctl class list`", name, path)
		} else if err != nil {
			return fmt.Errorf("remove class %s: %w", name, err)
		}
		return nil
	})
}

// Classes lists the class names that have a roster, sorted.
func Classes(configDir string) ([]string, error) {
	ents, err := os.ReadDir(Dir(configDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list classes: %w", err)
	}
	var names []string
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".toml")
		if ok && e.Type().IsRegular() && ValidClassName(n) == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// update runs edit on the current roster under the class's lock and
// replaces the file with its result atomically, after checking that the
// result parses: a bad edit leaves the file as it was.
func update(ctx context.Context, configDir, name string, edit func(*Roster) ([]byte, error)) (*Roster, error) {
	if err := ValidClassName(name); err != nil {
		return nil, err
	}
	var r *Roster
	err := locked(ctx, configDir, name, func() error {
		cur, err := Load(configDir, name)
		if err != nil {
			return err
		}
		out, err := edit(cur)
		if err != nil {
			return err
		}
		if r, err = Parse(name, cur.Path, out); err != nil {
			return fmt.Errorf("the edited roster would not read back (nothing written): %w", err)
		}
		return sockets.WriteFileAtomic(cur.Path, out, 0o600)
	})
	return r, err
}

// locked runs fn holding the class's lock file (a hidden file beside it),
// so two stemctl runs editing one class do not lose each other's change.
func locked(ctx context.Context, configDir, name string, fn func() error) error {
	dir := Dir(configDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, "."+name+".lock"), filelock.Exclusive)
	if err != nil {
		return fmt.Errorf("class %s is being edited by another stemctl: %w", name, err)
	}
	defer unlock()
	return fn()
}

// ParsePort reads an optional port column or flag value.
func ParsePort(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a TCP port (1-65535; leave it empty for 22)", s)
	}
	return p, nil
}
