package mcpserver

// Fuzz tests of the server's own argument parsing: card path resolution
// (resolveCardPath, matchEditable, protected), the pane capture cursor and
// the line limiter in front of the JSON-RPC reader. Run them with
//
//	go test -run '^$' -fuzz FuzzResolveCardPath ./internal/mcpserver/
//
// (one -fuzz target at a time); without -fuzz the seeds run as tests.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/tmux"
)

// cardFixture is a card repository with traps: a symlink to a secret
// beside it, a symlink to a directory outside, a symlink inside, git and
// stem state, and a nested repository.
type cardFixture struct {
	root, secret, outside string
}

func newCardFixture(t testing.TB) cardFixture {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "ws", "demo", "hello")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{"t1", ".git/hooks", ".stem/instances/x", ".rv", "t1/sub/.git/hooks", "t1/deep/er"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(outside, 0o755)
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	for _, f := range []string{"t1/words.c", "t1/hello.c", ".git/config", "t1/sub/.git/config", "t1/a#b.c", "t1/deep/er/x.c"} {
		os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644)
	}
	os.Symlink(secret, filepath.Join(root, "t1", "leak.c"))
	os.Symlink(outside, filepath.Join(root, "t1", "outdir"))
	os.Symlink("words.c", filepath.Join(root, "t1", "alias.c"))
	os.Symlink("../..", filepath.Join(root, "t1", "up"))
	os.Symlink(filepath.Join(root, ".git"), filepath.Join(root, "t1", "gitlink"))
	return cardFixture{root: root, secret: secret, outside: outside}
}

var pathSeeds = []string{
	"t1/words.c", "t1/hello.c", "t1/leak.c", "t1/outdir/secret.txt", "t1/outdir/new.c", "t1/alias.c", "t1/up/outside/secret.txt",
	"t1/gitlink/config", "t1/sub/.git/config", ".git/config", ".git/hooks/pre-commit", ".stem/instances/x/y", ".rv/z",
	"../outside/secret.txt", "t1/../../outside/secret.txt", "/etc/passwd", "", ".", "..", "/", "t1/", "t1//words.c",
	"t1/./words.c", "./t1/words.c", "t1/a#b.c", "t1/`touch x`.c", "t1/$(id).c", "t1/\x00.c", "t1/\n.c", "t1/\xff.c",
	"t1/\u202e.c", strings.Repeat("a/", 600), "t1/new/deeper/file.c", "T1/WORDS.C", "t1/words.c/", "t1/words.c/..",
}

func FuzzResolveCardPath(f *testing.F) {
	cf := newCardFixture(f)
	for _, s := range pathSeeds {
		f.Add(s, true)
		f.Add(s, false)
		f.Add(filepath.Join(cf.root, s), false)
	}
	realRoot, err := filepath.EvalSymlinks(cf.root)
	if err != nil {
		f.Fatal(err)
	}
	globs := []string{"t1/words.c", "t1/*.c", "t1/**", "t1/sub/**", "**"}
	f.Fuzz(func(t *testing.T, p string, mustExist bool) {
		cp, err := resolveCardPath(cf.root, p, mustExist)
		if err != nil {
			if cp != (cardPath{}) {
				t.Fatalf("error with a path: %+v %v", cp, err)
			}
			return
		}
		if !within(realRoot, cp.Abs) {
			t.Fatalf("resolveCardPath(%q) = %q, outside the card %q", p, cp.Abs, realRoot)
		}
		rel, _ := filepath.Rel(realRoot, cp.Abs)
		if filepath.ToSlash(rel) != cp.Rel || cp.Rel == ".." || strings.HasPrefix(cp.Rel, "../") || strings.HasPrefix(cp.Rel, "/") {
			t.Fatalf("resolveCardPath(%q): rel %q, abs %q", p, cp.Rel, cp.Abs)
		}
		// Whatever exists at the result resolves inside the card, and is
		// never the secret.
		real := cp.Abs
		if r, err := filepath.EvalSymlinks(cp.Abs); err == nil {
			real = r
		} else if !errors.Is(err, os.ErrNotExist) || mustExist {
			t.Fatalf("resolveCardPath(%q, %v) = %q, which does not resolve: %v", p, mustExist, cp.Abs, err)
		} else if pr, err := filepath.EvalSymlinks(filepath.Dir(cp.Abs)); err != nil || !within(realRoot, pr) {
			t.Fatalf("resolveCardPath(%q) = %q: its directory %q is not inside the card (%v)", p, cp.Abs, pr, err)
		}
		if !within(realRoot, real) || real == cf.secret || within(cf.outside, real) {
			t.Fatalf("resolveCardPath(%q) = %q resolves to %q", p, cp.Abs, real)
		}
		if checkPathText(p) != nil {
			t.Fatalf("resolveCardPath accepted %q, which checkPathText refuses", p)
		}
		// Git and stem state are never editable, whatever the globs say.
		if underProtected(cp.Rel) && matchEditable(globs, cp.Rel) {
			t.Fatalf("%q (from %q) is in git or stem state but matchEditable allows it", cp.Rel, p)
		}
	})
}

// underProtected reports whether any directory of rel is git or stem state.
func underProtected(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, d := range parts[:len(parts)-1] {
		for _, p := range protectedDirs {
			if d == p {
				return true
			}
		}
	}
	return false
}

func FuzzMatchEditable(f *testing.F) {
	for _, s := range [][2]string{{"t1/*.c", "t1/words.c"}, {"t1/**", "t1/.git/config"}, {"**", ".git/config"}, {"t1/words.c", "t1/words.c"},
		{".git/**", ".git/hooks/pre-commit"}, {"t1/**", "t1/sub/.git/hooks/post-checkout"}, {"[", "["}, {"t1/\\*", "t1/*"}, {"/**", "x"}, {"*/**", ".stem/x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, rel string) {
		ok := matchEditable([]string{glob}, rel)
		if ok && (protected(rel) || underProtected(rel)) {
			t.Fatalf("matchEditable([%q], %q) allows git or stem state", glob, rel)
		}
		if matchEditable(nil, rel) {
			t.Fatalf("no globs allowed %q", rel)
		}
	})
}

func TestProtectedNested(t *testing.T) {
	for rel, want := range map[string]bool{
		".git/config": true, ".git": true, ".stem/instances/x/notes": true, ".rv/state": true,
		"t1/sub/.git/hooks/pre-commit": true, "t1/.stem/x": true, "t1/words.c": false, "t1/.gitignore": false,
		".gitignore": false, "t1/git/x": false, "t1/.github/workflows/x": false,
	} {
		if got := protected(rel); got != want {
			t.Errorf("protected(%q) = %v, want %v", rel, got, want)
		}
	}
	if matchEditable([]string{"t1/**"}, "t1/sub/.git/hooks/pre-commit") {
		t.Error("a nested repository's hooks are editable through a t1/** glob")
	}
}

func FuzzParseCursor(f *testing.F) {
	const cid, other = "0123456789abcdef0123", "fedcba9876543210fedc"
	const srv, otherSrv = "4242-1796100052", "4242-1796100099"
	h := cursorServer(srv)
	for _, s := range []string{"c3:0123456789ab:" + h + ":%1:0", "c3:0123456789ab:" + h + ":%1:12345", "c3:0123456789ab:" + h + ":%1:-1",
		"c3:0123456789ab:" + h + ":%2:5", "c3:fedcba987654:" + h + ":%1:5", "c3:0123456789ab:00000000:%1:5", "c3:0123456789ab::%1:5",
		"c3:0123456789abcdef0123:" + h + ":%1:5", "c3::" + h + ":%1:5", "c2:0123456789ab:%1:5", "c1:%1:5", "c4:0123456789ab:" + h + ":%1:5",
		"c3:0123456789ab:" + h + ":%1", "c3:0123456789ab:" + h + ":%1:5:6", "", "c3::::", "c3:0123456789ab:" + h + ":%1:+5",
		"c3:0123456789ab:" + h + ":%1:99999999999999999999", "c3:0123456789ab:" + h + ":%1:0x10", "c3:0123456789ab:" + h + ":%1: 5",
		"c3:0123456789ab:" + h + ":%1:5\n", "c3:0123456789ab:" + h + ":%1:\u0665"} {
		f.Add(s, "%1", 0)
	}
	f.Fuzz(func(t *testing.T, s, pane string, n int) {
		p, err := tmux.ParsePaneID(pane)
		if err != nil {
			p = "%1" // the server validates pane ids first (paneArg)
		}
		abs, err := parseCursor(s, cid, srv, p)
		if err != nil {
			if c := errcode.Of(err); c != errcode.BadInput && c != errcode.Stale {
				t.Fatalf("parseCursor(%q): %v is not an input error (code %s)", s, err, c)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseCursor(%q): the error spans lines: %q", s, err)
			}
		} else if abs < 0 {
			t.Fatalf("parseCursor(%q) = %d", s, abs)
		} else if !strings.HasPrefix(s, "c3:"+cid[:12]+":"+h+":"+pane+":") {
			t.Fatalf("parseCursor(%q) accepted a cursor of another container, server or pane", s)
		}
		if n >= 0 {
			got, err := parseCursor(makeCursor(cid, srv, p, n), cid, srv, p)
			if err != nil || got != n {
				t.Fatalf("round trip of %d on pane %q: %d %v", n, pane, got, err)
			}
			// Another container's cursor, or one of another tmux server
			// in this container, is refused, saying to drop it.
			if _, err := parseCursor(makeCursor(other, srv, p, n), cid, srv, p); err == nil || !strings.Contains(err.Error(), "drop the cursor") {
				t.Fatalf("a cursor of container %s accepted in %s: %v", other, cid, err)
			}
			if _, err := parseCursor(makeCursor(cid, otherSrv, p, n), cid, srv, p); err == nil || !strings.Contains(err.Error(), "drop the cursor") {
				t.Fatalf("a cursor of tmux server %s accepted on %s: %v", otherSrv, srv, err)
			}
			if c := makeCursor(cid, srv, p, n); len(c) > 64 {
				t.Fatalf("cursor %q is longer than since's 64-byte limit", c)
			}
		}
	})
}

// oversizeLine stands for a dropped line in the output of limitLinesAll.
const oversizeLine = "<dropped>\n"

// limitLinesAll reads data line by line with readLimited, as the stdio
// transport does, and returns the lines with each dropped one replaced by
// oversizeLine.
func limitLinesAll(t testing.TB, r io.Reader, max int) ([]byte, int) {
	t.Helper()
	dropped := 0
	var out []byte
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLimited(br, max)
		if line == nil && err == nil {
			dropped++
			out = append(out, oversizeLine...)
		}
		out = append(out, line...)
		if err == io.EOF {
			return out, dropped
		}
		if err != nil {
			t.Fatalf("readLimited: %v", err)
		}
	}
}

// wantLimited is what limitLinesAll must produce: each line (with its
// newline) of at most max bytes unchanged, each longer one replaced.
func wantLimited(data []byte, max int) ([]byte, int) {
	var out []byte
	dropped := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data
		if i >= 0 {
			line = data[:i+1]
		}
		data = data[len(line):]
		if len(line) > max {
			out = append(out, oversizeLine...)
			dropped++
		} else {
			out = append(out, line...)
		}
	}
	return out, dropped
}

func FuzzLimitLines(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), 8)
	f.Add([]byte("short\nthis line is much too long\nok\n"), 10)
	f.Add([]byte("no newline at the end"), 5)
	f.Add([]byte("\n\n\n"), 1)
	f.Add([]byte("exactly8\nexactly9!\n"), 9)
	f.Add(bytes.Repeat([]byte("x"), 200000), 70000)
	f.Add(append(bytes.Repeat([]byte("y"), 70000), '\n', 'z', '\n'), 65536)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max < 1 || max > 1<<20 {
			max = 1 + (max&0xfffff+0xfffff)%(1<<20)
		}
		// Small reads exercise the buffer boundaries.
		chunk := 7
		if len(data) > 4096 {
			chunk = 8191
		}
		got, dropped := limitLinesAll(t, &smallReader{bytes.NewReader(data), chunk}, max)
		want, wantDropped := wantLimited(data, max)
		if !bytes.Equal(got, want) || dropped != wantDropped {
			t.Fatalf("readLimited(max %d):\n got %q\nwant %q (dropped %d, want %d)", max, clipBytes(got), clipBytes(want), dropped, wantDropped)
		}
	})
}

func clipBytes(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "…"...)
	}
	return b
}

// smallReader reads at most n bytes at a time.
type smallReader struct {
	r io.Reader
	n int
}

func (s *smallReader) Read(p []byte) (int, error) {
	if len(p) > s.n {
		p = p[:s.n]
	}
	return s.r.Read(p)
}

// TestLimitLinesBoundedMemory: a line far over the limit is skipped
// without being held in memory (what is allocated depends on the limit,
// not on the line), and the next line passes unchanged.
func TestLimitLinesBoundedMemory(t *testing.T) {
	const max = 4 << 20
	alloc := func(huge int) uint64 {
		r := io.MultiReader(&repeatReader{n: huge}, strings.NewReader("\n{\"jsonrpc\":\"2.0\"}\n"))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		br := bufio.NewReaderSize(r, 64<<10)
		first, err := readLimited(br, max)
		if err != nil || first != nil {
			t.Fatalf("first line %q, %v: want it dropped", clipBytes(first), err)
		}
		second, err := readLimited(br, max)
		if err != nil || string(second) != "{\"jsonrpc\":\"2.0\"}\n" {
			t.Fatalf("second line %q, %v", second, err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	huge := 512 << 20
	if testing.Short() {
		huge = 128 << 20 // still far above 8*max if memory grew with it
	}
	small, big := alloc(16<<20), alloc(huge)
	t.Logf("skipping a 16 MiB line allocated %d KiB, a %d MiB line %d KiB", small>>10, huge>>20, big>>10)
	if big > 8*max || big > small+max {
		t.Fatalf("memory grows with the dropped line: %d KiB for 16 MiB, %d KiB for 512 MiB", small>>10, big>>10)
	}
}

type repeatReader struct{ n int }

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'A'
	}
	r.n -= k
	return k, nil
}
