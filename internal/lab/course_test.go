package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
)

// TestCourseCards: a directory of cards is recorded once (absolute); a
// directory without cards is refused and leaves the record as it was.
func TestCourseCards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	if src, err := CourseCards(dir); err != nil || src != "" {
		t.Fatalf("nothing recorded: %q %v", src, err)
	}
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	if st := SetCourseCards(ctx, dir, cards); st.Result != Done {
		t.Fatalf("first: %+v", st)
	}
	if st := SetCourseCards(ctx, dir, cards); st.Result != Already {
		t.Fatalf("again: %+v", st)
	}
	if src, err := CourseCards(dir); err != nil || src != cards {
		t.Fatalf("recorded %q %v", src, err)
	}
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "README"), []byte("no cards"), 0o644)
	if st := SetCourseCards(ctx, dir, empty); st.Result != Failed || !strings.Contains(st.Detail, "no SERIES/CARD/stem.toml") {
		t.Fatalf("no cards: %+v", st)
	}
	if src, _ := CourseCards(dir); src != cards {
		t.Fatalf("a refused source replaced the record: %q", src)
	}
	fi, err := os.Stat(CardsSourcePath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
}
