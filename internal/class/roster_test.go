package class

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseReportsLineAndFix(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line       int
		want       []string
	}{
		{"syntax", "key = \"/k\"\n\n[student.anna]\nhost = anna@lab-03\n", 4, []string{"quoted strings", `host = "anna@lab-03"`}},
		{"duplicate table", "[student.anna]\nhost = \"anna@lab-03\"\n\n[student.anna]\nhost = \"anna@lab-04\"\n", 4, []string{"already been defined", "rename or remove the second"}},
		{"port as string", "[student.anna]\nhost = \"anna@lab-03\"\nport = \"22\"\n", 3, []string{"port must be a number, not a string"}},
		{"unknown key", "[student.anna]\nhost = \"anna@lab-03\"\n\n[student.bob]\nhots = \"bob@lab-04\"\n", 4, []string{"unknown key student.bob.hots", "host, port and key"}},
		{"no host", "[student.anna]\nhost = \"anna@lab-03\"\n[student.bob]\nport = 22\n", 3, []string{"student bob has no host", `host = "USER@HOST"`}},
		{"host without user", "\n\n[student.'anna']\nhost = \"lab-03\"\n", 3, []string{`host "lab-03" is not USER@HOST`, `host = "anna@lab-03"`}},
		{"bad port", "[student.anna]\nhost = \"anna@lab-03\"\nport = 70000\n", 1, []string{"not a TCP port"}},
		{"case duplicate", "[student.anna]\nhost = \"anna@lab-03\"\n[student.Anna]\nhost = \"anna@lab-04\"\n", 3, []string{`"Anna" and "anna" differ only in case`}},
		{"same account twice", "[student.anna]\nhost = \"anna@lab-03\"\n[student.ania]\nhost = \"anna@lab-03\"\n", 3, []string{"both reach anna@lab-03"}},
		{"relative key", "key = \"stem_k\"\n", 1, []string{`key "stem_k" must be an absolute path`}},
		{"cut short in a value", "[student.anna]\nhost = \"anna@lab-03\"\n\n[student.bob]\nhost = \"bob@la", 5, []string{"ends in the middle of this line", "complete the line or remove it"}},
		{"cut short in a header", "[student.anna]\nhost = \"anna@lab-03\"\n\n[stud", 4, []string{"the end of the file", "ends in the middle of this line"}},
		{"forbidden ssh option", "ssh_options = [\"LocalCommand=touch /tmp/x\"]\n", 1, []string{"not allowed here"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("lab", "/cfg/classes/lab.toml", []byte(c.text))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			prefix := "/cfg/classes/lab.toml line " + itoa(c.line) + ":"
			if !strings.HasPrefix(msg, prefix) {
				t.Errorf("error does not start %q:\n%s", prefix, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseGood(t *testing.T) {
	text := `# lab 3
key = "/home/k/.ssh/stem_k"
ssh_options = ["UserKnownHostsFile=/home/k/lab.known_hosts"]

[student.bob]
host = "bob@lab-04"

# Anna sits by the window.
[student."anna.k"]
host = "anna@lab-03"
port = 2222
key = "~/.ssh/stem_other"
`
	r, err := Parse("lab", "lab.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Students) != 2 || r.Students[0].Name != "anna.k" || r.Students[0].Port != 2222 || r.Students[0].Line != 9 ||
		r.Students[1].Name != "bob" || r.Students[1].Line != 5 || r.Key != "/home/k/.ssh/stem_k" || len(r.SSHOptions) != 1 {
		t.Fatalf("%+v", r)
	}
	if d := r.Students[0].Dest(); d != "anna@lab-03:2222" {
		t.Fatalf("dest %s", d)
	}
}

func TestInitAddRemoveKeepTheFile(t *testing.T) {
	ctx := context.Background()
	cfg := t.TempDir()
	if _, err := Init(ctx, cfg, "lab3", Settings{Key: "/k/stem_k", SSHOptions: []string{"UserKnownHostsFile=/k/kh"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(ctx, cfg, "lab3", Settings{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second init: %v", err)
	}
	if _, err := Add(ctx, cfg, "lab3", []Student{{Name: "anna", Host: "anna@lab-03"}, {Name: "bob", Host: "bob@lab-04", Port: 2222}}); err != nil {
		t.Fatal(err)
	}
	// The teacher's own comment survives later edits.
	path := Path(cfg, "lab3")
	data, _ := os.ReadFile(path)
	data = []byte(strings.Replace(string(data), "[student.bob]", "# bob: second row\n[student.bob]", 1))
	os.WriteFile(path, data, 0o600)
	if _, err := Add(ctx, cfg, "lab3", []Student{{Name: "cyd", Host: "cyd@lab-05"}}); err != nil {
		t.Fatal(err)
	}
	r, err := RemoveStudent(ctx, cfg, "lab3", "anna")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(r.Students) != 2 || strings.Contains(string(got), "anna") || !strings.Contains(string(got), "# bob: second row\n[student.bob]") ||
		!strings.Contains(string(got), "# stem class lab3") {
		t.Fatalf("after rm anna:\n%s", got)
	}
	if _, err := RemoveStudent(ctx, cfg, "lab3", "anna"); err == nil || !strings.Contains(err.Error(), `no student "anna"`) {
		t.Fatalf("rm again: %v", err)
	}
	names, _ := Classes(cfg)
	if len(names) != 1 || names[0] != "lab3" {
		t.Fatalf("classes %v", names)
	}
	if err := RemoveClass(ctx, cfg, "lab3"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(cfg, "lab3"); err == nil || !strings.Contains(err.Error(), "stemctl class init lab3") {
		t.Fatalf("load after rm: %v", err)
	}
}

// A refused edit leaves the roster byte for byte as it was, and no
// temporary file behind.
func TestRefusedEditsChangeNothing(t *testing.T) {
	ctx := context.Background()
	cfg := t.TempDir()
	Init(ctx, cfg, "lab", Settings{})
	if _, err := Add(ctx, cfg, "lab", []Student{{Name: "anna", Host: "anna@lab-03"}}); err != nil {
		t.Fatal(err)
	}
	path := Path(cfg, "lab")
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		add  []Student
		want string
	}{
		{[]Student{{Name: "anna", Host: "anna@lab-09"}}, "already has a student anna (anna@lab-03, line 5"},
		{[]Student{{Name: "ANNA", Host: "anna@lab-09"}}, "already has a student anna"},
		{[]Student{{Name: "ania", Host: "anna@lab-03"}}, "would reach anna@lab-03, as anna does already"},
		{[]Student{{Name: "bob", Host: "bob@lab-04"}, {Name: "bob", Host: "bob@lab-05"}}, "given twice"},
		{[]Student{{Name: "bob", Host: "bob@lab-04"}, {Name: "cyd", Host: "lab-05"}}, "not USER@HOST"},
		{[]Student{{Name: "-x", Host: "x@lab"}}, "student name"},
		{[]Student{{Name: "x", Host: "x@lab\n[student.y]"}}, "not USER@HOST"},
	} {
		if _, err := Add(ctx, cfg, "lab", c.add); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("add %v: %v, want %q", c.add, err, c.want)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Fatalf("add %v changed the roster:\n%s", c.add, after)
		}
	}
	ents, _ := os.ReadDir(Dir(cfg))
	for _, e := range ents {
		if e.Name() != "lab.toml" && e.Name() != ".lab.lock" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// The roster is replaced by rename: a reader never sees half a file, and
// the old inode stays whole until the new one is complete.
func TestWriteIsAtomic(t *testing.T) {
	ctx := context.Background()
	cfg := t.TempDir()
	Init(ctx, cfg, "lab", Settings{})
	path := Path(cfg, "lab")
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before, _ := os.ReadFile(path)
	if _, err := Add(ctx, cfg, "lab", []Student{{Name: "anna", Host: "anna@lab-03"}}); err != nil {
		t.Fatal(err)
	}
	held := make([]byte, 4096)
	n, _ := old.ReadAt(held, 0)
	if string(held[:n]) != string(before) {
		t.Fatalf("the old file was written in place:\n%s", held[:n])
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestImportCSV(t *testing.T) {
	good := "name,host,port\nanna,anna@lab-03,\n# absent today\nbob, bob@lab-04 ,2222\n\n\"cyd\",cyd@lab-05\n"
	ss, err := ReadCSV("class.csv", strings.NewReader("\xef\xbb\xbf"+good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 3 || ss[1].Host != "bob@lab-04" || ss[1].Port != 2222 || ss[2].Name != "cyd" || ss[2].Line != 6 {
		t.Fatalf("%+v", ss)
	}
	bad := "anna,anna@lab-03\nbob\nanna,anna@lab-09\ncyd,cyd@lab-05,ssh\ndan,lab-06\neve,eve@lab-07,1,2\n"
	_, err = ReadCSV("class.csv", strings.NewReader(bad))
	var ie *ImportError
	if !errors.As(err, &ie) || len(ie.Problems) != 5 {
		t.Fatalf("%v", err)
	}
	for _, w := range []string{
		"class.csv line 2: 1 columns; a row is name,host",
		"class.csv line 3: student anna is already on line 1",
		`class.csv line 4: port "ssh" is not a TCP port`,
		`class.csv line 5: student dan: host "lab-06" is not USER@HOST`,
		"class.csv line 6: 4 columns",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("lacks %q:\n%v", w, err)
		}
	}
	if _, err := ReadCSV("q.csv", strings.NewReader("anna,\"anna@lab\n")); err == nil || !strings.Contains(err.Error(), "q.csv line 1") {
		t.Fatalf("bad quote: %v", err)
	}
	if _, err := ReadCSV("e.csv", strings.NewReader("name,host\n")); err == nil || !strings.Contains(err.Error(), "no students") {
		t.Fatalf("empty: %v", err)
	}
}

// Importing names the import file's line for a student the roster has
// already, and adds nobody.
func TestImportAgainstRoster(t *testing.T) {
	ctx := context.Background()
	cfg := t.TempDir()
	Init(ctx, cfg, "lab", Settings{})
	Add(ctx, cfg, "lab", []Student{{Name: "anna", Host: "anna@lab-03"}})
	before, _ := os.ReadFile(Path(cfg, "lab"))
	ss, err := ReadCSV("more.csv", strings.NewReader("bob,bob@lab-04\nanna,anna@lab-09\nania,anna@lab-03\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(ctx, cfg, "lab", "more.csv", ss)
	if err == nil || !strings.Contains(err.Error(), "more.csv line 2: class lab already has a student anna") ||
		!strings.Contains(err.Error(), "more.csv line 3: student ania would reach anna@lab-03") {
		t.Fatalf("%v", err)
	}
	if after, _ := os.ReadFile(Path(cfg, "lab")); string(after) != string(before) {
		t.Fatal("a refused import changed the roster")
	}
	r, err := Import(ctx, cfg, "lab", "more.csv", ss[:1])
	if err != nil || len(r.Students) != 2 {
		t.Fatalf("%v %+v", err, r)
	}
}

func TestClassNames(t *testing.T) {
	for _, n := range []string{"", "-x", "../x", "a/b", "lab 3", strings.Repeat("a", 41)} {
		if ValidClassName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir()), "../etc"); err == nil {
		t.Fatal("path in class name accepted")
	}
}
