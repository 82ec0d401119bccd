package provenance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// threeChanges records three agent lines and returns the story and the
// record file's lines.
func threeChanges(t *testing.T) (*story, [][]byte) {
	t.Helper()
	s := newStory(t, "a", "b", "c")
	s.agent("a", 2, 1, "x")
	s.agent("b", 4, 3, "y")
	s.agent("a", 6, 5, "z")
	s.want("sasbsa")
	data, err := os.ReadFile(s.log.File(testCard, s.path))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	return s, lines[:len(lines)-1] // the last is empty
}

func (s *story) rewrite(lines [][]byte) {
	s.t.Helper()
	if err := os.WriteFile(s.log.File(testCard, s.path), bytes.Join(lines, nil), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *story) problems() (*History, string) {
	s.t.Helper()
	h, err := s.log.Read(testCard, s.path)
	if err != nil {
		s.t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range h.Problems {
		b.WriteString(p.Reason + "\n")
	}
	return h, b.String()
}

// TestHostileRecords: whatever is in a record file, reading it never
// fails as a whole; each bad line is named and left out, and the rest is
// used.
func TestHostileRecords(t *testing.T) {
	cases := []struct {
		name   string
		edit   func([][]byte) [][]byte
		reason string
		blame  string // of the three-change text
	}{
		{"garbage line", func(l [][]byte) [][]byte {
			return append(l[:1:1], append([][]byte{[]byte("\x1b]0;pwned\x07 not json\n")}, l[1:]...)...)
		}, "does not match its hash", "sasbsa"},
		{"edited record", func(l [][]byte) [][]byte {
			l[1] = bytes.Replace(l[1], []byte(`"agent":"b"`), []byte(`"agent":"c"`), 1)
			return l
		}, "does not match its hash", "sasssa"}, // b's line is the student's now
		{"removed record", func(l [][]byte) [][]byte { return append(l[:1:1], l[2]) }, "chain is broken", "sasssa"},
		{"reordered", func(l [][]byte) [][]byte { return [][]byte{l[1], l[0], l[2]} }, "chain is broken", ""},
		{"cut off the end", func(l [][]byte) [][]byte { return l[:2] }, "removed from the end", "sasbss"},
		{"huge line", func(l [][]byte) [][]byte {
			return append(l, append(bytes.Repeat([]byte("A"), maxLineBytes+1), '\n'))
		}, "longer than stem writes", ""},
		{"another file's record", func(l [][]byte) [][]byte {
			// A record moved in from another file's chain keeps its own
			// hash but not this file's chain or path.
			o := Open(t.TempDir())
			o.Record(context.Background(), Change{Card: testCard, Path: "other.c", Who: Who{Agent: "q"}, Before: []string{"a"}, Hunks: []Hunk{{Start: 1, End: 1}}})
			data, _ := os.ReadFile(o.File(testCard, "other.c"))
			return append(l, data)
		}, "about another file", "sasbsa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, lines := threeChanges(t)
			text := s.text
			s.rewrite(c.edit(lines))
			h, probs := s.problems()
			if !strings.Contains(probs, c.reason) {
				t.Fatalf("problems %q, want %q", probs, c.reason)
			}
			if c.blame != "" {
				got := ""
				for _, l := range Blame(h, text) {
					if l.Change != nil {
						got += l.Change.Who.Agent
					} else {
						got += "s"
					}
				}
				if got != c.blame {
					t.Fatalf("blame %s, want %s", got, c.blame)
				}
			}
		})
	}
}

// TestAppendRefusesBrokenTail: stem does not append to a file whose last
// line is not a record (its chain could not be followed); the caller gets
// a WriteError and must not make the change.
func TestAppendRefusesBrokenTail(t *testing.T) {
	s, lines := threeChanges(t)
	s.rewrite(append(lines, []byte("half a rec")))
	_, err := s.log.Record(context.Background(), Change{Card: testCard, Path: s.path, Who: Who{Agent: "a"}, Before: s.text, Hunks: []Hunk{{Start: 1, End: 1}}})
	var we *WriteError
	if err == nil || !strings.Contains(err.Error(), "move the file aside") {
		t.Fatalf("append after a broken line: %v", err)
	}
	if !errors.As(err, &we) {
		t.Fatalf("%T is not a *WriteError", err)
	}
}

// TestRecordFileNotFollowed: a symlink or FIFO in place of the record
// file is refused, never followed or waited on.
func TestRecordFileNotFollowed(t *testing.T) {
	s := newStory(t, "a")
	s.agent("a", 1, 1, "b")
	f := s.log.File(testCard, s.path)
	canary := f + ".canary"
	os.Rename(f, canary)
	if err := os.Symlink(canary, f); err != nil {
		t.Fatal(err)
	}
	if _, err := s.log.Read(testCard, s.path); err == nil {
		t.Fatal("read through a symlink")
	}
	if _, err := s.log.Record(context.Background(), Change{Card: testCard, Path: s.path, Before: []string{"b"}, Hunks: []Hunk{{Start: 1, End: 1}}}); err == nil {
		t.Fatal("appended through a symlink")
	}
	// Control: the canary is a record file that reads fine.
	os.Remove(f)
	os.Rename(canary, f)
	if h, err := s.log.Read(testCard, s.path); err != nil || len(h.Changes) != 1 {
		t.Fatalf("control: %v %+v", err, h)
	}
	os.Remove(f)
	if err := syscall.Mkfifo(f, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.log.Read(testCard, s.path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FIFO: %v", err)
	}
}

// TestNoRecords: a file never changed through stem has an empty history.
func TestNoRecords(t *testing.T) {
	l := Open(t.TempDir())
	h, err := l.Read(testCard, "none.c")
	if err != nil || len(h.Changes) != 0 || len(h.Problems) != 0 {
		t.Fatalf("%v %+v", err, h)
	}
	if got := Blame(h, []string{"a", "b"}); got[0].By != ByContainer || got[1].By != ByContainer {
		t.Fatalf("%+v", got)
	}
}
