package class

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/lib/tomlmsg"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// Limits on a roster file: a class is tens of students, a lab hundreds.
const (
	maxRosterBytes = 1 << 20
	MaxStudents    = 1000
)

// Dir is where the rosters live under stem's config directory.
func Dir(configDir string) string { return filepath.Join(configDir, "classes") }

// Path is the roster file of class name.
func Path(configDir, name string) string { return filepath.Join(Dir(configDir), name+".toml") }

// Roster is one class: who is in it and how to reach each student.
type Roster struct {
	Name string `json:"class"`
	Path string `json:"file"`
	// Key is the automation private key for students without their own;
	// "" means the one `stemctl access keygen` made in ~/.ssh.
	Key string `json:"key,omitempty"`
	// SSHOptions are ssh -o KEY=VALUE options for every student (the ones
	// `stemctl teacher` accepts with --ssh-option).
	SSHOptions []string  `json:"ssh_options,omitempty"`
	Students   []Student `json:"students"` // sorted by name

	data []byte // the file as read, for edits that keep the rest as written
}

// Student is one row of the roster.
type Student struct {
	Name string `json:"name"`
	Host string `json:"host"` // USER@HOST
	Port int    `json:"port,omitempty"`
	Key  string `json:"key,omitempty"` // overrides the class's key
	Line int    `json:"-"`             // the line of its table in the file, 0 if unknown
}

// Dest is USER@HOST, or USER@HOST:PORT with a port.
func (s Student) Dest() string {
	if s.Port != 0 {
		return fmt.Sprintf("%s:%d", s.Host, s.Port)
	}
	return s.Host
}

// FileError is a problem in a roster or import file, at a line when known.
type FileError struct {
	Path string
	Line int
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %s", e.Path, e.Line, e.Msg)
	}
	return e.Path + ": " + e.Msg
}

var (
	classNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$`)
	studentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// USER@HOST; teacherkey.Target checks the host again when it builds ssh's
	// command line.
	studentHostRE = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}@[A-Za-z0-9_:\[][A-Za-z0-9._:%\[\]-]{0,254}$`)
)

// ValidClassName says why name cannot name a class, or nil.
func ValidClassName(name string) error {
	if !classNameRE.MatchString(name) {
		return fmt.Errorf("class name %q: use letters, digits, '-' and '_' (at most 40, not starting with '-' or '_'), e.g. lab3-2026", name)
	}
	return nil
}

// checkStudent says what is wrong with s, in the words of the file.
func checkStudent(s Student) error {
	if !studentNameRE.MatchString(s.Name) {
		return fmt.Errorf("student name %q: use letters, digits, '.', '-' and '_' (at most 64), e.g. anna or anna.k", s.Name)
	}
	if s.Host == "" {
		return fmt.Errorf("student %s has no host: write host = \"USER@HOST\" (the student's account on their machine)", s.Name)
	}
	if !studentHostRE.MatchString(s.Host) {
		return fmt.Errorf("student %s: host %q is not USER@HOST: write the student's account and machine, e.g. host = \"anna@lab-03\"", s.Name, s.Host)
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("student %s: port %d is not a TCP port (1-65535; leave it out for 22)", s.Name, s.Port)
	}
	if s.Key != "" && !filepath.IsAbs(s.Key) && !strings.HasPrefix(s.Key, "~/") {
		return fmt.Errorf("student %s: key %q must be an absolute path (or start with ~/)", s.Name, s.Key)
	}
	return nil
}

// checkSSHOptions vets options the way stemctl teacher does.
func checkSSHOptions(opts []string) error {
	_, err := teacherkey.Target{Host: "student@host", Key: "/key", SSHOptions: opts}.Command()
	return err
}

// rosterFile is the TOML shape.
type rosterFile struct {
	Key        string                 `toml:"key"`
	SSHOptions []string               `toml:"ssh_options"`
	Student    map[string]studentFile `toml:"student"`
}

type studentFile struct {
	Host string `toml:"host"`
	Port int    `toml:"port"`
	Key  string `toml:"key"`
}

// Load reads class name's roster from configDir.
func Load(configDir, name string) (*Roster, error) {
	if err := ValidClassName(name); err != nil {
		return nil, err
	}
	path := Path(configDir, name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no class %q (no %s): make it with `stemctl class init %s`, or see `stemctl class list`", name, path, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read class %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRosterBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxRosterBytes {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("larger than %d bytes: is this a roster?", maxRosterBytes)}
	}
	return Parse(name, path, data)
}

// Parse checks a roster's text. Every error names the file, the line when
// it can, and what to write instead.
func Parse(name, path string, data []byte) (*Roster, error) {
	var rf rosterFile
	md, err := toml.Decode(string(data), &rf)
	if err != nil {
		return nil, explainTOML(path, data, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		line := 0
		if len(k) >= 2 && k[0] == "student" {
			line = headerLine(data, k[1])
		}
		return nil, &FileError{Path: path, Line: line, Msg: fmt.Sprintf("unknown key %s: the file takes key and ssh_options at the top, and [student.NAME] tables with host, port and key", k)}
	}
	if err := checkSSHOptions(rf.SSHOptions); err != nil {
		return nil, &FileError{Path: path, Line: keyLine(data, "ssh_options"), Msg: err.Error()}
	}
	if rf.Key != "" && !filepath.IsAbs(rf.Key) && !strings.HasPrefix(rf.Key, "~/") {
		return nil, &FileError{Path: path, Line: keyLine(data, "key"), Msg: fmt.Sprintf("key %q must be an absolute path (or start with ~/)", rf.Key)}
	}
	if len(rf.Student) > MaxStudents {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("%d students; a class holds at most %d", len(rf.Student), MaxStudents)}
	}
	r := &Roster{Name: name, Path: path, Key: rf.Key, SSHOptions: rf.SSHOptions, data: data}
	for n, sf := range rf.Student {
		s := Student{Name: n, Host: sf.Host, Port: sf.Port, Key: sf.Key, Line: headerLine(data, n)}
		if err := checkStudent(s); err != nil {
			return nil, &FileError{Path: path, Line: s.Line, Msg: err.Error()}
		}
		r.Students = append(r.Students, s)
	}
	sort.Slice(r.Students, func(i, j int) bool { return r.Students[i].Name < r.Students[j].Name })
	if err := checkDuplicates(r.Students); err != nil {
		return nil, &FileError{Path: path, Line: err.line, Msg: err.msg}
	}
	return r, nil
}

type dupError struct {
	line int
	msg  string
}

// checkDuplicates refuses two students whose names differ only in case,
// and two names for the same account: both are mistakes a status table
// would hide.
func checkDuplicates(ss []Student) *dupError {
	byName := map[string]Student{}
	byDest := map[string]Student{}
	for _, s := range ss {
		if o, ok := byName[strings.ToLower(s.Name)]; ok {
			return &dupError{max(o.Line, s.Line), fmt.Sprintf("students %q and %q differ only in case: rename one", o.Name, s.Name)}
		}
		byName[strings.ToLower(s.Name)] = s
		d := destKey(s)
		if o, ok := byDest[d]; ok {
			return &dupError{max(o.Line, s.Line), fmt.Sprintf("students %s and %s both reach %s: remove one, or correct its host", o.Name, s.Name, s.Dest())}
		}
		byDest[d] = s
	}
	return nil
}

// explainTOML turns a decoder error into "FILE line N: what to fix".
func explainTOML(path string, data []byte, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := strings.ReplaceAll(pe.Message, `'\x00'`, "the end of the file")
		switch {
		case cutShort(data, pe.Position.Line):
			msg += "; the file ends in the middle of this line (cut short, by a full disk or an interrupted copy?): complete the line or remove it"
		case strings.Contains(msg, "has already been defined"):
			msg += ": each student has one [student.NAME] table; rename or remove the second one"
		case strings.Contains(msg, "expected") || strings.Contains(msg, "unexpected"):
			msg += ` (values are quoted strings, e.g. host = "anna@lab-03"; port is a bare number)`
		}
		return &FileError{Path: path, Line: pe.Position.Line, Msg: msg}
	}
	// Type errors carry "line N" in their text already.
	return fmt.Errorf("%s %w", path, tomlmsg.Explain(err))
}

// cutShort says whether line is the last of data and has no newline: a
// file cut short ends that way, one a person wrote almost never does.
func cutShort(data []byte, line int) bool {
	return len(data) > 0 && data[len(data)-1] != '\n' && line == bytes.Count(data, []byte{'\n'})+1
}

// headerLine is the line of [student.NAME] (bare or quoted), or 0.
func headerLine(data []byte, name string) int {
	q := regexp.QuoteMeta(name)
	re := regexp.MustCompile(`^\s*\[\s*student\s*\.\s*(?:` + q + `|"` + q + `"|'` + q + `')\s*\]`)
	return findLine(data, re)
}

// keyLine is the line of a top-level "key =" assignment, or 0.
func keyLine(data []byte, key string) int {
	return findLine(data, regexp.MustCompile(`^\s*`+regexp.QuoteMeta(key)+`\s*=`))
}

func findLine(data []byte, re *regexp.Regexp) int {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if re.Match(l) {
			return i + 1
		}
	}
	return 0
}

// KeyFor is the automation key for s: the student's own, else the
// class's, else "" (the only one `stemctl access keygen` made). A leading
// ~/ is home.
func (r *Roster) KeyFor(s Student, home string) string {
	key := s.Key
	if key == "" {
		key = r.Key
	}
	if rest, ok := strings.CutPrefix(key, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return key
}
