package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseManifestOpen(t *testing.T) {
	head := "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n"
	m, err := ParseManifest("stem.toml", []byte(head+`open = ["t1/main.c", "t1/*.S", "README.md"]`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Tasks[0].Open, " "); got != "t1/main.c t1/*.S README.md" {
		t.Errorf("open = %q", got)
	}
	many := `open = ["` + strings.Repeat(`a", "`, MaxOpen) + `a"]`
	for _, bad := range []string{`open = ["../x.c"]`, `open = ["/etc/passwd"]`, `open = [""]`, `open = ["t1/[x"]`, `open = ["t1/"]`, many} {
		_, err := ParseManifest("stem.toml", []byte(head+bad+"\n"))
		if err == nil || !strings.Contains(err.Error(), "open") {
			t.Errorf("%s: err %v, want a refusal naming open", bad, err)
		}
	}
}

func TestOpenFiles(t *testing.T) {
	card := t.TempDir()
	outside := t.TempDir()
	for _, f := range []string{"t1/b.c", "t1/a.c", "t1/start.S", "t1/notes.txt", "t1/sub/deep.c", "README.md"} {
		os.MkdirAll(filepath.Join(card, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(card, f), []byte("x\n"), 0o644)
	}
	os.WriteFile(filepath.Join(outside, "secret.c"), []byte("x\n"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.c"), filepath.Join(card, "t1", "link.c"))
	os.Symlink(outside, filepath.Join(card, "t1", "out"))
	os.Mkdir(filepath.Join(card, "t1", "dir.c"), 0o755)
	rel := func(ps []string) string {
		var out []string
		for _, p := range ps {
			r, err := filepath.Rel(card, p)
			if err != nil || !filepath.IsAbs(p) {
				t.Fatalf("%q is not an absolute path in the card", p)
			}
			out = append(out, r)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		open, editable []string
		want           string
	}{
		// open wins, in its order; globs expand in name order; symlinks,
		// directories and files reached through a link out of the card are
		// left out, as are names that match nothing.
		{[]string{"t1/start.S", "t1/*.c", "t1/out/*.c", "t1/missing.c", "t1/a.c"}, []string{"README.md"}, "t1/start.S t1/a.c t1/b.c"},
		// Default: the editable files, without whole trees.
		{nil, []string{"t1/*.c", "t1/sub/**", "README.md"}, "t1/a.c t1/b.c README.md"},
		{nil, nil, ""},
	} {
		r := &Resolved{CardPath: card, Open: c.open, Editable: c.editable}
		if got := rel(r.OpenFiles()); got != c.want {
			t.Errorf("open %q editable %q: %q, want %q", c.open, c.editable, got, c.want)
		}
	}
	for i := 0; i < MaxOpen+4; i++ {
		os.WriteFile(filepath.Join(card, "t1", "sub", "f"+string(rune('a'+i))+".c"), nil, 0o644)
	}
	r := &Resolved{CardPath: card, Open: []string{"t1/sub/*.c"}}
	if n := len(r.OpenFiles()); n != MaxOpen {
		t.Errorf("%d files opened, want at most %d", n, MaxOpen)
	}
}

// The example task 4 opens its C file first, then the assembly.
func TestExampleOpen(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.Resolve("hazard3-sim", "inf", "bss", "4", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range r.OpenFiles() {
		got = append(got, filepath.Base(p))
	}
	if strings.Join(got, " ") != "main.c counter.S" {
		t.Errorf("inf/bss 4 opens %q", got)
	}
}
