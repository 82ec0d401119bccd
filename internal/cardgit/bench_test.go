package cardgit

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkCheck: what up, status and every effectful stem-mcp call add
// for the card's git (identity, nested-repository scan), on the example
// card inf/bss.
func BenchmarkCheck(b *testing.B) {
	card := filepath.Join(b.TempDir(), "bss")
	if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot(), "examples/workspace/inf/bss"), card).CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	id, err := Prepare(card)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Check(ctx, card, id); err != nil {
			b.Fatal(err)
		}
	}
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
