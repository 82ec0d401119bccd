package access

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestCheckReportIsStable: check's report is the same on every run. Keys
// that appear in several stem lines without a grant are reported in
// fingerprint order, not in the order of a Go map (which changes from one
// iteration to the next).
func TestCheckReportIsStable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var lines []string
	for i := 0; i < 8; i++ {
		_, k := newKey(t)
		for j := 0; j < 2; j++ {
			lines = append(lines, fmt.Sprintf(`restrict,command="%s gate --grant g%015x%d" %s`, f.m.MCPBinary, i, j, k))
		}
	}
	f.write(t, strings.Join(lines, "\n")+"\n", 0o600)

	render := func() string {
		rep, err := f.m.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, p := range rep.Problems {
			b.WriteString(p.String() + "\n")
		}
		return b.String()
	}
	first := render()
	var fps []string
	for _, l := range strings.Split(first, "\n") {
		if strings.Contains(l, "with no grant") {
			fps = append(fps, strings.Fields(strings.SplitN(l, "key ", 2)[1])[0])
		}
	}
	if len(fps) != 8 {
		t.Fatalf("want 8 keys reported without a grant, got %d:\n%s", len(fps), first)
	}
	if !sort.StringsAreSorted(fps) {
		t.Errorf("keys without a grant not in fingerprint order: %v", fps)
	}
	for i := 0; i < 30; i++ {
		if got := render(); got != first {
			t.Fatalf("check run %d reported differently:\n%s\nfirst run:\n%s", i, got, first)
		}
	}
}
