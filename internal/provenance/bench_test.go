package provenance

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// benchHistory writes n agent changes to a file of about lines lines,
// with the student editing a few lines between them, and returns the log
// and the final text.
func benchHistory(b *testing.B, lines, n int) (*Log, []string) {
	b.Helper()
	r := rand.New(rand.NewSource(1))
	l := Open(b.TempDir())
	text := make([]string, lines)
	for i := range text {
		text[i] = fmt.Sprintf("    line %d of the student's program;", i)
	}
	for c := 0; c < n; c++ {
		at := 1 + r.Intn(len(text))
		end := at - 1 + r.Intn(3) // insert, or replace 1 or 2 lines
		if end > len(text) {
			end = len(text)
		}
		var repl []string
		for k := r.Intn(4) + 1; k > 0; k-- {
			repl = append(repl, fmt.Sprintf("    agent line %d.%d;", c, k))
		}
		// Keep the file near its size.
		if len(text) > lines {
			end = min(at+1, len(text))
		}
		hunks := []Hunk{{Start: at, End: end, Lines: repl}}
		if _, err := l.Record(context.Background(), Change{Card: testCard, Path: "t1/big.c", Who: Who{Agent: fmt.Sprint(c % 3), Level: "assist"},
			Tool: "nvim_buffer_edit", Before: text, Hunks: hunks}); err != nil {
			b.Fatal(err)
		}
		text = Apply(text, hunks)
		for k := r.Intn(3); k > 0; k-- {
			p := r.Intn(len(text))
			text[p] = fmt.Sprintf("    student edit %d.%d;", c, k)
		}
	}
	return l, text
}

// BenchmarkBlame is `audit blame`'s work for a 1,000-line file with 200
// recorded changes: read and check the records, then walk them.
func BenchmarkBlame(b *testing.B) {
	l, text := benchHistory(b, 1000, 200)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := l.Read(testCard, "t1/big.c")
		if err != nil || len(h.Changes) != 200 || len(h.Problems) > 0 {
			b.Fatalf("%v %d %v", err, len(h.Changes), h.Problems)
		}
		lines := Blame(h, text)
		if s := Summarize(h, lines); s.Container == len(text) {
			b.Fatal("no agent line found")
		}
	}
}

// BenchmarkRecord is the cost a direct edit adds for its record (with
// the fsync) on a 1,000-line buffer.
func BenchmarkRecord(b *testing.B) {
	l := Open(b.TempDir())
	text := make([]string, 1000)
	for i := range text {
		text[i] = fmt.Sprintf("    line %d;", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Record(context.Background(), Change{Card: testCard, Path: "t1/big.c", Who: Who{Agent: "a", Level: "assist"},
			Before: text, Hunks: []Hunk{{Start: 10, End: 10, Lines: []string{"x"}}}}); err != nil {
			b.Fatal(err)
		}
	}
}
