package provenance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

const testCard = "/home/s/dev/workspace/stem/inf/bss"

// story is a file's life: agents change it through the log, the student
// changes it directly.
type story struct {
	t    *testing.T
	log  *Log
	path string
	text []string
}

func newStory(t *testing.T, lines ...string) *story {
	t.Helper()
	return &story{t: t, log: Open(t.TempDir()), path: "t1/main.c", text: lines}
}

// agent records and makes a change of lines start..end to new.
func (s *story) agent(who string, start, end int, newLines ...string) {
	s.t.Helper()
	w := Who{Account: "alice", Agent: who, Level: "assist", Session: "s1"}
	if strings.HasPrefix(who, "teacher:") {
		w = Who{Account: strings.TrimPrefix(who, "teacher:"), Grant: "g1", Level: "full"}
	}
	hunks := []Hunk{{Start: start, End: end, Lines: newLines}}
	if _, err := s.log.Record(context.Background(), Change{Card: testCard, Path: s.path, Who: w, Tool: "nvim_buffer_edit", Before: s.text, Hunks: hunks}); err != nil {
		s.t.Fatal(err)
	}
	s.text = Apply(s.text, hunks)
}

// student replaces lines start..end (1-based) with new.
func (s *story) student(start, end int, newLines ...string) {
	s.text = Apply(s.text, []Hunk{{Start: start, End: end, Lines: newLines}})
}

// want checks the blame: one letter per line, s = student, a/b = agents
// a and b, t = a teacher, ? = unknown.
func (s *story) want(pattern string) []Line {
	s.t.Helper()
	h, err := s.log.Read(testCard, s.path)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(h.Problems) > 0 {
		s.t.Fatalf("problems reading the records: %v", h.Problems)
	}
	lines := Blame(h, s.text)
	var got strings.Builder
	for _, l := range lines {
		switch l.By {
		case ByContainer:
			got.WriteByte('s')
		case ByUnknown:
			got.WriteByte('?')
		case ByTeacher:
			got.WriteByte('t')
		default:
			got.WriteString(l.Change.Who.Agent)
		}
	}
	if got.String() != pattern {
		s.t.Fatalf("blame %s, want %s\ntext:\n%s", got.String(), pattern, strings.Join(s.text, "\n"))
	}
	return lines
}

func TestBlameStory(t *testing.T) {
	s := newStory(t, "#include <stdio.h>", "", "int main(void) {", "}")
	s.want("ssss")
	s.agent("a", 4, 3, `    printf("hello\n");`, "    return 0;")
	s.want("sssaas")
	// The student edits an AI line: it is theirs now.
	s.student(4, 4, `    printf("hello, world\n");`)
	s.want("ssssas")
	// They add lines around the AI's.
	s.student(1, 0, "/* main.c */")
	s.student(7, 6, "    // done")
	s.want("sssssass")
	// Another agent replaces the student's comment and an AI line.
	s.agent("b", 6, 7, "    return 1; /* b */")
	s.want("sssssbs")
	// The student reverts b's line to what a wrote: the line is back, but
	// it is the student's typing now, not a's change (it came after b's).
	s.student(6, 6, "    return 0;")
	s.want("sssssss")
	// A teacher inserts a line at the top.
	s.agent("teacher:bob", 1, 0, "// reviewed")
	s.want("tsssssss")
}

// TestBlameCommonLines: an agent inserts a block whose lines are common
// ones ("}", ""): the count of its lines stays right whatever the diff
// pairs them with.
func TestBlameCommonLines(t *testing.T) {
	s := newStory(t, "int f(void) {", "}", "", "int g(void) {", "}")
	s.agent("a", 3, 2, "", "int h(void) {", "}")
	lines := s.want("ssaaasss")
	if lines[2].Change == nil || lines[2].Change.Seq != 1 {
		t.Fatalf("line 3: %+v", lines[2])
	}
	s.student(1, 0, "// top")
	s.want("sssaaasss")
}

// TestSameAs: an agent's line moved elsewhere is the student's (the diff
// sees it deleted and added), with a hint that an agent wrote that text;
// short lines get no hint.
func TestSameAs(t *testing.T) {
	s := newStory(t, "int a;", "int b;", "int c;")
	s.agent("a", 4, 3, "    total += weight(i);", "}")
	s.want("sssaa")
	// The student moves both lines to the top.
	s.student(4, 5)
	s.student(1, 0, "    total += weight(i);", "}")
	lines := s.want("sssss")
	if lines[0].SameAs == nil || lines[0].SameAs.Who.Agent != "a" {
		t.Fatalf("moved line: %+v", lines[0])
	}
	if lines[1].SameAs != nil || lines[2].SameAs != nil {
		t.Fatalf("hints on a short line or a line no agent wrote: %+v %+v", lines[1], lines[2])
	}
}

// TestBlameSameLineTwice: two agents write the same text at different
// places; each keeps its own line.
func TestBlameSameLineTwice(t *testing.T) {
	s := newStory(t, "a", "b", "c")
	s.agent("a", 2, 1, "x = 1;")
	s.agent("b", 5, 4, "x = 1;")
	s.want("sassb")
	s.student(1, 1)
	s.want("assb")
}

func TestBlameEmptyAndDeleted(t *testing.T) {
	s := newStory(t)
	s.want("")
	s.agent("a", 1, 0, "one", "two")
	s.want("aa")
	s.student(1, 2) // the student deletes everything
	s.want("")
	// They type one of the lines again, where it was: blame works on
	// content, so that cannot be told from the agent's line coming back
	// (docs/security.md says so).
	s.student(1, 0, "one")
	s.want("a")
	s.student(1, 1, "one;")
	s.want("s")
}

// TestBlameSnapshotLimit: a record without a snapshot stops the walk, and
// what it could not tell is unknown, not the student's.
func TestBlameSnapshotLimit(t *testing.T) {
	s := newStory(t, "a", "b")
	s.agent("a", 3, 2, "c")
	if _, err := s.log.Record(context.Background(), Change{Card: testCard, Path: s.path, Who: Who{Agent: "b", Level: "assist"},
		NoSnapshot: true, Hunks: []Hunk{{Start: 1, End: 0, Lines: []string{"z"}}}}); err != nil {
		t.Fatal(err)
	}
	s.text = append([]string{"z"}, s.text...)
	s.want("????")
	// Nothing after it can be traced either: the walk starts there.
	s.student(5, 4, "d")
	s.want("?????")
}

// TestPendingOutcome: a change whose outcome says it was not made is left
// out; one with no outcome was made; one that may have been made counts as
// made, marked unconfirmed.
func TestPendingOutcome(t *testing.T) {
	ctx := context.Background()
	s := newStory(t, "a")
	rec := func(line string) int64 {
		seq, err := s.log.Record(ctx, Change{Card: testCard, Path: s.path, Who: Who{Agent: "a", Level: "assist"}, Before: s.text,
			Hunks: []Hunk{{Start: len(s.text) + 1, End: len(s.text), Lines: []string{line}}}, Pending: true})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	seq := rec("b")
	if err := s.log.Outcome(ctx, testCard, s.path, seq, NotMade, "the buffer changed"); err != nil {
		t.Fatal(err)
	}
	s.text = append(s.text, "b") // the student typed the same line
	s.want("ss")
	rec("c") // made: no outcome
	s.text = append(s.text, "c")
	s.want("ssa")
	seq = rec("d")
	if err := s.log.Outcome(ctx, testCard, s.path, seq, MaybeMade, "timeout"); err != nil {
		t.Fatal(err)
	}
	s.text = append(s.text, "d")
	lines := s.want("ssaa")
	if !lines[3].Change.Unconfirmed || lines[2].Change.Unconfirmed {
		t.Fatalf("unconfirmed: %+v %+v", lines[2].Change, lines[3].Change)
	}
	if err := s.log.Outcome(ctx, testCard, s.path, seq, "made", ""); err == nil {
		t.Fatal("an outcome other than not made or maybe made was written")
	}
}

// TestDOSLineEnds: a file saved with "\r\n" blames like its buffer.
func TestDOSLineEnds(t *testing.T) {
	s := newStory(t, "a", "b")
	s.agent("a", 2, 1, "x")
	s.text = SplitFile([]byte("a\r\nx\r\nb\r\n"))
	s.want("sas")
}

func TestRecordRefusesBadChanges(t *testing.T) {
	l := Open(t.TempDir())
	ctx := context.Background()
	for _, c := range []Change{
		{Card: "relative", Path: "a.c", Before: []string{"x"}, Hunks: []Hunk{{1, 1, nil}}},
		{Card: testCard, Path: "/abs.c", Before: []string{"x"}, Hunks: []Hunk{{1, 1, nil}}},
		{Card: testCard, Path: "a.c", Before: []string{"x"}},
		{Card: testCard, Path: "a.c", Before: []string{"x"}, Hunks: []Hunk{{2, 2, nil}}},
		{Card: testCard, Path: "a.c", Before: []string{"x", "y"}, Hunks: []Hunk{{2, 2, nil}, {1, 1, nil}}},
	} {
		if _, err := l.Record(ctx, c); err == nil {
			t.Errorf("recorded %+v", c)
		}
	}
	if _, err := os.Stat(l.Dir()); err == nil {
		t.Error("a refused change created the directory")
	}
}

// TestRecordsStayPrivate: the directory and files are the account's only.
func TestRecordsStayPrivate(t *testing.T) {
	s := newStory(t, "a")
	s.agent("a", 1, 1, "b")
	for _, p := range []string{s.log.Dir(), s.log.File(testCard, s.path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", p, fi.Mode())
		}
	}
	data, err := os.ReadFile(s.log.File(testCard, s.path))
	if err != nil {
		t.Fatal(err)
	}
	// Content hashes only: the text itself is never kept.
	if strings.Contains(string(data), `"b"`) || !strings.Contains(string(data), `"before_sha256"`) {
		t.Fatalf("record: %s", data)
	}
}

func TestConcurrentRecords(t *testing.T) {
	l := Open(t.TempDir())
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := l.Record(context.Background(), Change{Card: testCard, Path: "x.c", Who: Who{Agent: fmt.Sprint(i)},
				Before: []string{"a"}, Hunks: []Hunk{{Start: 1, End: 1, Lines: []string{fmt.Sprint(i)}}}})
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	h, err := l.Read(testCard, "x.c")
	if err != nil || len(h.Problems) > 0 || len(h.Changes) != 8 {
		t.Fatalf("%v %+v", err, h)
	}
}

// TestSplitFile: a file splits into the lines Neovim would hold for it.
func TestSplitFile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"a\nb", []string{"a", "b"}},
		{"a\nb\n", []string{"a", "b"}},
		{"a\n\n", []string{"a", ""}},
		{"\xef\xbb\xbfbom\n", []string{"bom"}},
		{"caf\xe9\n", []string{"café"}}, // latin1, as Neovim reads it
		{"café\n", []string{"café"}},
		{"dos\r\n", []string{"dos\r"}}, // HashLine drops the '\r'
	} {
		got := SplitFile([]byte(c.in))
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("SplitFile(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if HashLine("dos\r") != HashLine("dos") {
		t.Error("a DOS line end changes the hash")
	}
}

// TestPartialRecordOfAKilledWriter: the start of a record a writer killed
// mid-write left is cut off by the next record, and the history reads
// whole; after a record the head does not reach, or bytes that start no
// record, nothing is removed and the record is refused.
func TestPartialRecordOfAKilledWriter(t *testing.T) {
	ctx := context.Background()
	l := Open(t.TempDir())
	change := func(i int) Change {
		return Change{Card: testCard, Path: "x.c", Who: Who{Agent: fmt.Sprint(i)},
			Before: []string{"a"}, Hunks: []Hunk{{Start: 1, End: 1, Lines: []string{fmt.Sprint(i)}}}}
	}
	for i := range 2 {
		if _, err := l.Record(ctx, change(i)); err != nil {
			t.Fatal(err)
		}
	}
	file := l.File(testCard, "x.c")
	whole, _ := os.ReadFile(file)
	const partial = `{"seq":3,"time":"2026-12-06T13:00:00Z","ki`
	os.WriteFile(file, append(whole, partial...), 0o600)
	if seq, err := l.Record(ctx, change(2)); err != nil || seq != 3 {
		t.Fatalf("record after a partial one: seq %d, %v", seq, err)
	}
	if h, err := l.Read(testCard, "x.c"); err != nil || len(h.Problems) > 0 || len(h.Changes) != 3 {
		t.Fatalf("history after the repair: %v %+v", err, h)
	}

	for name, content := range map[string][]byte{
		"a record missing before it": append(whole, partial...), // the head records seq 3 now
		"bytes that start no record": append(whole, `{"kind":`...),
	} {
		os.WriteFile(file, content, 0o600)
		if _, err := l.Record(ctx, change(9)); err == nil {
			t.Errorf("%s: recorded", name)
		}
		if got, _ := os.ReadFile(file); string(got) != string(content) {
			t.Errorf("%s: the refused record changed the file", name)
		}
	}
}
