package access

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/levels"
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

// TestDuplicateNamesAreNotResolvedByChance: Grant keeps names unique, but
// a hand-edited store may name two grants alike. Revoking by that name is
// refused (instead of revoking whichever grant map order gives first),
// each can be revoked by ID, and Find, Sorted and Grant's refusal of a key
// that has two grants always give the same answer.
func TestDuplicateNamesAreNotResolvedByChance(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, a := newKey(t)
	_, b := newKey(t)
	ga, err := f.m.Grant(ctx, GrantRequest{Name: "ta", PublicKey: a, Level: levels.Observe.String()})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := f.m.Grant(ctx, GrantRequest{Name: "tb", PublicKey: b, Level: levels.Observe.String()})
	if err != nil {
		t.Fatal(err)
	}
	// Hand edits: b's grant renamed "ta", and copies of a's grant under
	// more IDs and names (so map order has many ways to differ).
	var ids []string
	if err := f.m.Store.Update(ctx, func(st *State) error {
		g := st.Grants[gb.ID]
		g.Name = "ta"
		st.Grants[gb.ID] = g
		for i := 0; i < 6; i++ {
			dup := st.Grants[ga.ID]
			dup.ID, dup.Name = fmt.Sprintf("g%016d", i), fmt.Sprintf("copy%d", i)
			st.Grants[dup.ID] = dup
		}
		for id, g := range st.Grants {
			if g.Name == "ta" {
				ids = append(ids, id)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(ids)

	for i := 0; i < 30; i++ {
		st, err := f.m.Store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := st.Find("ta"); !ok || g.ID != ids[0] {
			t.Fatalf("Find(ta) = %s, %v; want the smallest ID %s", g.ID, ok, ids[0])
		}
		var got []string
		for _, g := range st.Sorted() {
			got = append(got, g.Name+"/"+g.ID)
		}
		if want := sortedLabels(st); strings.Join(got, " ") != want {
			t.Fatalf("Sorted = %s\nwant    %s", strings.Join(got, " "), want)
		}
		// a's key has seven grants; the refusal names the first by name.
		_, err = f.m.Grant(ctx, GrantRequest{Name: "new", PublicKey: a, Level: levels.Observe.String()})
		if err == nil || !strings.Contains(err.Error(), "already granted as copy0;") {
			t.Fatalf("granting a's key again: %v", err)
		}
	}

	_, _, err = f.m.Revoke(ctx, "ta")
	if err == nil || !strings.Contains(err.Error(), "2 grants are named ta") || !strings.Contains(err.Error(), ids[0]+", "+ids[1]) {
		t.Fatalf("revoke by a name two grants share: %v", err)
	}
	st, err := f.m.Store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Named("ta")) != 2 {
		t.Fatalf("a refused revoke removed a grant: %+v", st.Named("ta"))
	}
	g, _, err := f.m.Revoke(ctx, gb.ID)
	if err != nil || g.ID != gb.ID {
		t.Fatalf("revoke by ID: %+v %v", g, err)
	}
	// One grant named ta is left: the name works again.
	if g, _, err := f.m.Revoke(ctx, "ta"); err != nil || g.ID != ga.ID {
		t.Fatalf("revoke the last grant named ta: %+v %v", g, err)
	}
}

// sortedLabels is name/ID of every grant, by name then ID.
func sortedLabels(st *State) string {
	var out []string
	for _, g := range st.Grants {
		out = append(out, g.Name+"/"+g.ID)
	}
	sort.Slice(out, func(i, j int) bool {
		ni, ii, _ := strings.Cut(out[i], "/")
		nj, ij, _ := strings.Cut(out[j], "/")
		if ni != nj {
			return ni < nj
		}
		return ii < ij
	})
	return strings.Join(out, " ")
}
