package provenance

import (
	"math/rand"
	"strings"
	"testing"
)

// lcs is the length of a longest common subsequence (the O(NM) table).
func lcs(a, b []int) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkMatch checks that m is a valid matching of b onto a (equal
// elements, strictly increasing) and returns how many it matched.
func checkMatch(t *testing.T, a, b []int, m []int32) int {
	t.Helper()
	if len(m) != len(b) {
		t.Fatalf("%d entries for %d lines", len(m), len(b))
	}
	n, last := 0, int32(-1)
	for j, i := range m {
		if i < 0 {
			continue
		}
		if i <= last || int(i) >= len(a) || a[i] != b[j] {
			t.Fatalf("a=%v b=%v: bad match b[%d] -> a[%d] (%v)", a, b, j, i, m)
		}
		last = i
		n++
	}
	return n
}

// TestMatchIndexIsMinimal compares the diff with the LCS table on random
// sequences: every match is valid and there are as many as an LCS has
// (Myers finds a shortest edit script, so a longest common subsequence).
func TestMatchIndexIsMinimal(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 3000; iter++ {
		alpha := 2 + r.Intn(6)
		a := make([]int, r.Intn(40))
		b := make([]int, r.Intn(40))
		for i := range a {
			a[i] = r.Intn(alpha)
		}
		if r.Intn(2) == 0 {
			// b an edited copy of a, the usual case.
			b = append(b[:0], a...)
			for k := r.Intn(6); k > 0 && len(b) > 0; k-- {
				p := r.Intn(len(b))
				switch r.Intn(3) {
				case 0:
					b = append(b[:p], b[p+1:]...)
				case 1:
					b = append(b[:p], append([]int{r.Intn(alpha)}, b[p:]...)...)
				default:
					b[p] = r.Intn(alpha)
				}
			}
		} else {
			for i := range b {
				b[i] = r.Intn(alpha)
			}
		}
		got := checkMatch(t, a, b, matchIndex(a, b))
		if want := lcs(a, b); got != want {
			t.Fatalf("a=%v b=%v: %d matches, an LCS has %d", a, b, got, want)
		}
	}
}

func TestMatchIndexEdges(t *testing.T) {
	for _, c := range []struct{ a, b []int }{
		{nil, nil}, {nil, []int{1}}, {[]int{1}, nil}, {[]int{1}, []int{2}},
		{[]int{1, 2, 3}, []int{1, 2, 3}}, {[]int{1, 2, 3}, []int{3, 2, 1}},
	} {
		got := checkMatch(t, c.a, c.b, matchIndex(c.a, c.b))
		if want := lcs(c.a, c.b); got != want {
			t.Errorf("a=%v b=%v: %d matches, want %d", c.a, c.b, got, want)
		}
	}
}

// TestMatchIndexBounded: two long unrelated sequences with a common tail
// still finish (the cost cap), and the tail is matched.
func TestMatchIndexBounded(t *testing.T) {
	const n = 30000
	a, b := make([]int, n), make([]int, n)
	for i := range a {
		a[i], b[i] = 2*i, 2*i+1
	}
	a = append(a, 7, 8, 9)
	b = append(b, 7, 8, 9)
	m := matchIndex(a, b)
	checkMatch(t, a, b, m)
	if m[n] != n || m[n+2] != n+2 {
		t.Fatalf("the common tail is not matched: %v", m[n:])
	}
}

// TestDiffHunks: the hunks Diff gives turn before into after, and are
// valid for a record.
func TestDiffHunks(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	words := []string{"a", "b", "}", "", "x = 1;"}
	for iter := 0; iter < 2000; iter++ {
		before := make([]string, r.Intn(12))
		for i := range before {
			before[i] = words[r.Intn(len(words))]
		}
		after := append([]string(nil), before...)
		for k := r.Intn(4); k > 0; k-- {
			p := r.Intn(len(after) + 1)
			switch {
			case r.Intn(2) == 0 && p < len(after):
				after = append(after[:p], after[p+1:]...)
			default:
				after = append(after[:p], append([]string{words[r.Intn(len(words))]}, after[p:]...)...)
			}
		}
		h := Diff(before, after)
		if got := Apply(before, h); strings.Join(got, "|") != strings.Join(after, "|") || len(got) != len(after) {
			t.Fatalf("before %q after %q: hunks %+v give %q", before, after, h, got)
		}
		if len(h) > 0 {
			if _, err := (Change{Card: "/c", Path: "p", Before: before, Hunks: h}).record(); err != nil {
				t.Fatalf("before %q after %q: hunks %+v: %v", before, after, h, err)
			}
		}
	}
}
