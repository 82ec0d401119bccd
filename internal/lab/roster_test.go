package lab

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/class"
)

func TestReadStudents(t *testing.T) {
	t.Parallel()
	in := "\xef\xbb\xbfname,full name,email\n# a comment\nanna,Anna Kowalska,anna@example.org\nben\n\ncarl_2,Carl\n"
	got, err := ReadStudents("s.csv", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Student{{"anna", "Anna Kowalska", "anna@example.org"}, {"ben", "", ""}, {"carl_2", "Carl", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReadStudentsRefuses: every bad row is named and nothing is read.
func TestReadStudentsRefuses(t *testing.T) {
	t.Parallel()
	in := "anna\nroot\nAnna\n../x\nanna\nbob,Bob:0:0,x\ncid,C,a,b\n"
	_, err := ReadStudents("s.csv", strings.NewReader(in))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"line 2", "line 3", "line 4", "line 5: anna is already on line 1", "line 6", "line 7: 4 columns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in %v", want, err)
		}
	}
	if _, err := ReadStudents("e.csv", strings.NewReader("name\n# nobody\n")); err == nil || !strings.Contains(err.Error(), "no students") {
		t.Errorf("empty: %v", err)
	}
}

// TestRoster: rows are added once, replaced when the host changes,
// dropped, and the file is what class import reads.
func TestRoster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := &Options{Dir: dir, Host: "lab-03"}
	if st := addToRoster(o, "ben"); st.Result != Done {
		t.Fatalf("%+v", st)
	}
	if st := addToRoster(o, "anna"); st.Result != Done {
		t.Fatalf("%+v", st)
	}
	if st := addToRoster(o, "anna"); st.Result != Already {
		t.Fatalf("again: %+v", st)
	}
	o.Host = "lab-04"
	if st := addToRoster(o, "anna"); st.Result != Done {
		t.Fatalf("new host: %+v", st)
	}
	data, _ := os.ReadFile(RosterPath(dir))
	if string(data) != "name,host\nanna,anna@lab-04\nben,ben@lab-03\n" {
		t.Fatalf("roster:\n%s", data)
	}
	rows, err := class.ReadCSV("r", bytes.NewReader(data))
	if err != nil || len(rows) != 2 {
		t.Fatalf("class import reads %+v %v", rows, err)
	}
	if err := dropFromRoster(dir, "anna"); err != nil {
		t.Fatal(err)
	}
	if rows, _ := ReadRoster(dir); len(rows) != 1 || rows[0].Name != "ben" {
		t.Fatalf("after drop: %+v", rows)
	}
	if err := dropFromRoster(dir, "ben"); err != nil {
		t.Fatal(err)
	}
	if rows, err := ReadRoster(dir); len(rows) != 0 || err != nil {
		t.Fatalf("empty roster: %+v %v", rows, err)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"anna", "b_2", "_x", "a-b"} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "root", "Anna", "-x", "a/b", "a b", "0abc", strings.Repeat("a", 33)} {
		if ValidName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
