package tmux

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

const testKey = "0123456789abcdef"

// mk is the mark ESC ] 133 ; body ; key BEL.
func mk(body, key string) string { return "\x1b]133;" + body + ";" + key + "\x07" }

func testMarks() *Marks { return &Marks{known: func(k string) bool { return k == testKey }} }

func TestMarks(t *testing.T) {
	m := testMarks()
	k := testKey
	// First prompt: D without C is not a command.
	if got := m.Feed([]byte(mk("D;0", k) + mk("A", k) + "$ ")); len(got) != 0 {
		t.Fatalf("first prompt reported %v", got)
	}
	// A command, split across chunks, with output in between.
	c := mk("C", k)
	if got := m.Feed([]byte("make\r\n" + c[:4])); len(got) != 0 {
		t.Fatal("partial mark reported")
	}
	m.Feed([]byte(c[4:] + "cc -o x x.c\r\nerror\r\n"))
	if !m.Running() {
		t.Fatal("a command is running")
	}
	got := m.Feed([]byte(mk("D;2", k) + mk("A", k) + "$ " + mk("D;2", k)))
	if !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("got %v, want [2] (the repeated D after an empty line is no command)", got)
	}
	// A crash: 139 = 128 + SIGSEGV; two commands in one chunk.
	got = m.Feed([]byte(mk("C", k) + mk("D;139", k) + mk("A", k) + mk("C", k) + mk("D;0", k)))
	if !reflect.DeepEqual(got, []int{139, 0}) {
		t.Fatalf("got %v", got)
	}
	// A keyed D without the C before it, and a non-numeric status: ignored.
	if got := m.Feed([]byte(mk("D;7", k) + mk("C", k) + mk("D;x", k))); len(got) != 0 {
		t.Fatalf("marks out of order reported %v", got)
	}
}

// TestMarksForged: marks a program prints (without the shell's key, with
// another key, or the old unkeyed form) neither start nor end a command.
func TestMarksForged(t *testing.T) {
	m := testMarks()
	forged := []string{
		"\x1b]133;C\x07", "\x1b]133;D;139\x07", // the unkeyed form
		mk("C", "fedcba9876543210"), mk("D;139", "fedcba9876543210"), // another key
		mk("C", strings.ToUpper(testKey)), mk("D;0", testKey+"0"), mk("D;0", ""),
		"\x1b]133;C;" + testKey + ";x\x07", // the key not last
	}
	for _, f := range forged {
		if got := m.Feed([]byte(f)); len(got) != 0 || m.Running() {
			t.Errorf("forged %q: reported %v, running %v", f, got, m.Running())
		}
	}
	// A real command whose output holds forged marks ends only at the real D.
	out := mk("C", testKey) + "\x1b]133;D;0\x07" + mk("D;0", "fedcba9876543210") + "more\r\n" + mk("D;3", testKey)
	if got := m.Feed([]byte(out)); !reflect.DeepEqual(got, []int{3}) {
		t.Fatalf("got %v, want [3]", got)
	}
	// Marks with no way to check keys count nothing.
	var bare Marks
	if got := bare.Feed([]byte(mk("C", testKey) + mk("D;1", testKey))); len(got) != 0 {
		t.Fatalf("zero Marks reported %v", got)
	}
}

func TestParseMarkKeys(t *testing.T) {
	var many []string
	for i := 0; i < maxMarkKeys+10; i++ {
		many = append(many, fmt.Sprintf("%016x", 0xa000000000000000+uint64(i)))
	}
	k := parseMarkKeys(" " + testKey + " junk ABCDEF0123456789 " + strings.Join(many, " "))
	if len(k) != maxMarkKeys || k[testKey] || k["junk"] || !k[many[len(many)-1]] {
		t.Fatalf("keys %d, has the first %v, has the newest %v", len(k), k[testKey], k[many[len(many)-1]])
	}
}

func FuzzMarks(f *testing.F) {
	f.Add([]byte(mk("C", testKey) + mk("D;1", testKey)))
	f.Add([]byte("\x1b]133;C\x07\x1b]133;D;1\x07"))
	f.Add([]byte(mk("A", testKey) + "$ \x00make\r\n" + mk("C", testKey) + mk("D;2", testKey)))
	f.Fuzz(func(t *testing.T, p []byte) {
		// Fed whole and in two chunks (the prompt ends at a chunk).
		m := testMarks()
		got := m.FeedCommands(p)
		m2 := testMarks()
		half := len(p) / 2
		got2 := append(m2.FeedCommands(p[:half]), m2.FeedCommands(p[half:])...)
		if len(got) != len(got2) {
			t.Fatalf("%d commands whole, %d in two chunks", len(got), len(got2))
		}
		for _, c := range append(got, got2...) {
			if !utf8.ValidString(c.Line) || strings.ContainsAny(c.Line, "\x00\r\n\x1b\b\t") || c.Line != strings.TrimSpace(c.Line) {
				t.Fatalf("line %q", c.Line)
			}
		}
	})
}

// TestMarksCommandLine: the command line is read back from the prompt and
// readline's echo between the marks A and C, chunk by chunk as tmux sends
// %output; whenever it cannot be read for certain it is "" (never a guess).
func TestMarksCommandLine(t *testing.T) {
	k := testKey
	prompt := mk("D;0", k) + mk("A", k) + "\x1b[?2004h\x1b[1;32mstudent\x1b[0m$ "
	enter := "\r\n\x1b[?2004l\r" + mk("C", k)
	done := "cc: error\r\n" + mk("D;2", k) + mk("A", k) + "student$ "
	for _, tc := range []struct {
		name   string
		chunks []string
		want   string
	}{
		{"typed key by key", []string{prompt, "m", "a", "k", "e", " ", "t", "e", "s", "t", enter, done}, "make test"},
		{"prompt and A in separate reads", []string{mk("D;0", k) + mk("A", k), "student$ ", "make", enter, done}, "make"},
		{"one read from A to C", []string{mk("D;0", k) + mk("A", k) + "student$ make" + enter, done}, ""},
		{"typed ahead: prompt and line in one read", []string{mk("A", k) + "student$ make", enter, done}, ""},
		// The rest of the prompt is read as typing: no match for "make".
		{"prompt split across reads", []string{mk("A", k) + "stu", "dent$ make", enter, done}, "dent$ make"},
		{"a typo erased", []string{prompt, "makx", "\b\x1b[K", "e", enter, done}, "make"},
		{"an erased last letter", []string{prompt, "make", "\b\x1b[K", enter, done}, "mak"},
		{"erase without CSI K", []string{prompt, "make", "\b \b", enter, done}, "mak"},
		{"insert mode in the middle", []string{prompt, "mke", "\b\b", "\x1b[4ha\x1b[4l", enter, done}, "make"},
		{"insert characters", []string{prompt, "mke", "\x1b[2D", "\x1b[1@a", enter, done}, "make"},
		{"delete a character", []string{prompt, "maake", "\x1b[3D", "\x1b[P", enter, done}, "make"},
		{"history recall redraws", []string{prompt, "ls -l", "\r\x1b[1;32mstudent\x1b[0m$ make\x1b[K", enter, done}, "make"},
		{"tab expanded", []string{prompt, "make\ttest", enter, done}, "make   test"}, // tab stops from column 0
		{"continuation line", []string{prompt, "echo 'a", "\r\n" + mk("A;k=s", k) + "> ", "b'", enter, done}, ""},
		{"cursor up", []string{prompt, "make", "\x1b[A", enter, done}, ""},
		{"saved cursor", []string{prompt, "\x1b7make", enter, done}, ""},
		{"output on another line", []string{prompt, "\r\nmake", enter, done}, ""},
		{"no prompt mark seen", []string{"student$ ", "make", enter, done}, ""},
		{"a forged prompt mark", []string{prompt, mk("A", "fedcba9876543210") + "$ ", "make", enter, done}, "$ make"},
		{"past the column bound", []string{prompt, strings.Repeat("x", cmdMaxCols), enter, done}, ""},
		{"utf-8", []string{prompt, "echo é", enter, done}, "echo é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMarks()
			var got []Command
			for _, c := range tc.chunks {
				got = append(got, m.FeedCommands([]byte(c))...)
			}
			if len(got) != 1 || got[0].Status != 2 || got[0].Line != tc.want {
				t.Fatalf("got %+v, want one command with status 2 and line %q", got, tc.want)
			}
		})
	}
	// Back to back: each command gets its own line.
	m := testMarks()
	var got []Command
	for _, c := range []string{prompt, "make", enter, done, "make test", "\r\n" + mk("C", k) + "ok\r\n" + mk("D;0", k) + mk("A", k) + "student$ "} {
		got = append(got, m.FeedCommands([]byte(c))...)
	}
	if !reflect.DeepEqual(got, []Command{{Status: 2, Line: "make"}, {Status: 0, Line: "make test"}}) {
		t.Fatalf("back to back: %+v", got)
	}
}

// A stem-wait mark before D gives the real wait status; one with an
// unknown key, malformed, or for another status is ignored, and it never
// carries over to the next command.
func TestMarksWaitStatus(t *testing.T) {
	k := testKey
	run := func(s string) []Command {
		t.Helper()
		return testMarks().FeedCommands([]byte(mk("A", k) + mk("C", k) + s))
	}
	for _, tc := range []struct {
		name, in string
		want     Command
	}{
		{"killed", mk("C", k) + mk("stem-wait;139;11", k) + mk("D;139", k), Command{Status: 139, Waited: true, Signal: 11}},
		{"exit 139", mk("stem-wait;139;0", k) + mk("D;139", k), Command{Status: 139, Waited: true}},
		{"no wait mark", mk("D;139", k), Command{Status: 139}},
		{"forged key", mk("stem-wait;139;0", "fedcba9876543210") + mk("D;139", k), Command{Status: 139}},
		{"other status", mk("stem-wait;2;0", k) + mk("D;139", k), Command{Status: 139}},
		{"signal without 128+n", mk("stem-wait;3;11", k) + mk("D;3", k), Command{Status: 3}},
		{"malformed", mk("stem-wait;x;0", k) + mk("D;1", k), Command{Status: 1}},
	} {
		got := run(tc.in)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	m := testMarks()
	m.FeedCommands([]byte(mk("C", k) + mk("stem-wait;139;11", k) + mk("D;139", k)))
	if got := m.FeedCommands([]byte(mk("C", k) + mk("D;139", k))); len(got) != 1 || got[0].Waited {
		t.Errorf("a wait mark carried over: %+v", got)
	}
}
