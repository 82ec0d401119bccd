package runspec

import (
	"fmt"
	"strings"
	"testing"
)

// TestEnvironOrder: base's variables keep their order, overridden ones
// leave it, and the overrides follow sorted by name with the last map
// winning, the same on every call (they come from maps).
func TestEnvironOrder(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h", "ZZ=base", "AA=base", "TERM=dumb"}
	spec := map[string]string{"TERM": "spec", "AA": "spec"}
	for i := 0; i < 10; i++ {
		spec[fmt.Sprintf("STEM_%d", i)] = "x"
	}
	want := "PATH=/bin HOME=/h ZZ=base AA=spec STEM_0=x STEM_1=x STEM_2=x STEM_3=x STEM_4=x STEM_5=x STEM_6=x STEM_7=x STEM_8=x STEM_9=x TERM=last"
	for i := 0; i < 30; i++ {
		got := strings.Join(Environ(base, spec, map[string]string{"TERM": "last"}), " ")
		if got != want {
			t.Fatalf("call %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
