package cardaccess

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCardUnchanged is what every `stemctl up` pays once the card has
// its ACLs: a walk of 1,000 files in 50 directories that changes nothing.
func BenchmarkCardUnchanged(b *testing.B) {
	dir := b.TempDir()
	for d := 0; d < 50; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("t%d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 20; f++ {
			os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.c", f)), []byte("int x;\n"), 0o644)
		}
	}
	g := Grant{Container: 4242, Student: 4343}
	if _, err := Card(dir, g); err != nil {
		b.Skipf("no ACLs here: %v", err)
	}
	for b.Loop() {
		st, err := Card(dir, g)
		if err != nil || st.Changed != 0 || st.Visited != 1051 {
			b.Fatalf("%+v %v", st, err)
		}
	}
}
