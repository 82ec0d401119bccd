package tmux

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
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
	f.Fuzz(func(t *testing.T, p []byte) {
		m := testMarks()
		for _, n := range m.Feed(p) {
			_ = n
		}
	})
}
