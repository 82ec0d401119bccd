package chainlog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHash(t *testing.T) {
	sum := sha256.Sum256([]byte("prev\n{\"seq\":1}"))
	if got := Hash("prev", []byte(`{"seq":1}`)); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("Hash = %s", got)
	}
}

func TestLastLine(t *testing.T) {
	long := strings.Repeat("x", 20000) // past the first and second reads
	for _, c := range []struct{ content, want string }{
		{"", ""},
		{"\n\n", ""},
		{"one", "one"},
		{"one\n", "one"},
		{"one\ntwo\n", "two"},
		{"one\ntwo\n\n\n", "two"},
		{"one\n" + long + "\n", long},
		{long + "\nlast\n", "last"},
		{long, long},
	} {
		f := file(t, c.content)
		got, err := LastLine(f, 1<<20)
		if err != nil || string(got) != c.want {
			t.Errorf("LastLine of %.20q (%d bytes) = %.20q (%d bytes), %v", c.content, len(c.content), got, len(got), err)
		}
	}
	// A line longer than max is refused once more than max bytes are read.
	huge := "one\n" + strings.Repeat(long, 5) + "\n"
	if _, err := LastLine(file(t, huge), 10000); !errors.Is(err, ErrLongLine) {
		t.Fatalf("a last line over max: %v", err)
	}
	if got, err := LastLine(file(t, huge), 1<<20); err != nil || len(got) != 5*len(long) {
		t.Fatalf("the same line under a larger max: %d bytes, %v", len(got), err)
	}
}

func file(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestPartial(t *testing.T) {
	const line = `{"seq":1,"prev":"","hash":"h"}` + "\n"
	for _, c := range []struct {
		content string
		want    int64
		err     error
	}{
		{"", 0, nil},
		{line, 0, nil},
		{line + line, 0, nil},
		{line + `{"seq":2,"pr`, 12, nil},
		{line + `{"se`, 4, nil},
		{`{"seq":1,"pr`, 12, nil},
		{line + `{`, 1, nil},
		{line + `garbage`, 0, ErrNotPartial},
		{line + ` {"seq":2`, 0, ErrNotPartial},
		{line + strings.Repeat("x", 100), 0, ErrNotPartial},
		{`{"seq":` + strings.Repeat("x", 100), 0, ErrNotPartial}, // longer than any line
	} {
		f, err := os.CreateTemp(t.TempDir(), "log")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(c.content)
		got, err := Partial(f, `{"seq":`, 64)
		f.Close()
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("Partial(%q) = %d, %v; want %d, %v", c.content, got, err, c.want, c.err)
		}
	}
}
