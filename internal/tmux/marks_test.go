package tmux

import (
	"reflect"
	"testing"
)

func TestMarks(t *testing.T) {
	var m Marks
	// First prompt: D without C is not a command.
	if got := m.Feed([]byte("\x1b]133;D;0\x07\x1b]133;A\x07$ ")); len(got) != 0 {
		t.Fatalf("first prompt reported %v", got)
	}
	// A command, split across chunks, with output in between.
	if got := m.Feed([]byte("make\r\n\x1b]13")); len(got) != 0 {
		t.Fatal("partial mark reported")
	}
	m.Feed([]byte("3;C\x07cc -o x x.c\r\nerror\r\n"))
	if !m.Running() {
		t.Fatal("a command is running")
	}
	got := m.Feed([]byte("\x1b]133;D;2\x07\x1b]133;A\x07$ \x1b]133;D;2\x07"))
	if !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("got %v, want [2] (the repeated D after an empty line is no command)", got)
	}
	// A crash: 139 = 128 + SIGSEGV; two commands in one chunk.
	got = m.Feed([]byte("\x1b]133;C\x07\x1b]133;D;139\x07\x1b]133;A\x07\x1b]133;C\x07\x1b]133;D;0\x07"))
	if !reflect.DeepEqual(got, []int{139, 0}) {
		t.Fatalf("got %v", got)
	}
	// Program output that forges a mark without the C before it is ignored;
	// a non-numeric status is ignored.
	if got := m.Feed([]byte("\x1b]133;D;7\x07\x1b]133;C\x07\x1b]133;D;x\x07")); len(got) != 0 {
		t.Fatalf("forged marks reported %v", got)
	}
}

func FuzzMarks(f *testing.F) {
	f.Add([]byte("\x1b]133;C\x07\x1b]133;D;1\x07"))
	f.Fuzz(func(t *testing.T, p []byte) {
		var m Marks
		for _, n := range m.Feed(p) {
			_ = n
		}
	})
}
