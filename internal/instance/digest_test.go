package instance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The identity follows the content: an identical binary installed again
// (a new inode, a new mtime) keeps it; new content of the same size under
// the old mtime changes it, cache or not.
func TestBinaryIdentityIsTheContent(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache", "mcp-digest.json")
	bin := filepath.Join(dir, "stem-mcp")
	write := func(p, content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(bin, "build one\n")
	first := binaryIdentity(cache, bin)
	if !strings.HasPrefix(first, "sha256:") {
		t.Fatalf("identity %q", first)
	}
	if again := binaryIdentity(cache, bin); again != first {
		t.Fatalf("the same file: %s, then %s", first, again)
	}

	// Reinstalled: same content in a new file renamed over the old one.
	tmp := filepath.Join(dir, "stem-mcp.new")
	write(tmp, "build one\n")
	later := time.Now().Add(time.Hour)
	os.Chtimes(tmp, later, later)
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	if got := binaryIdentity(cache, bin); got != first {
		t.Errorf("an identical binary installed again: %s, want %s", got, first)
	}

	// Rebuilt in place: same size, mtime set back; the ctime moves.
	fi, _ := os.Stat(bin)
	write(bin, "build two\n")
	os.Chtimes(bin, fi.ModTime(), fi.ModTime())
	second := binaryIdentity(cache, bin)
	if second == first || second == "" {
		t.Errorf("new content of the same size and mtime: %s, was %s", second, first)
	}
	if got := binaryIdentity("", bin); got != second {
		t.Errorf("without a cache: %s, with one %s", got, second)
	}
	if got := binaryIdentity(cache, filepath.Join(dir, "missing")); got != "" {
		t.Errorf("a missing binary: %q", got)
	}
}

// A file whose stamp matches is not read again: the cached digest is
// what counts (here a forged one shows it was used).
func TestBinaryIdentityUsesTheCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "mcp-digest.json")
	bin := filepath.Join(dir, "stem-mcp")
	os.WriteFile(bin, []byte("binary\n"), 0o755)
	binaryIdentity(cache, bin)
	var entries map[string]cached
	data, err := os.ReadFile(cache)
	if err != nil || json.Unmarshal(data, &entries) != nil {
		t.Fatalf("cache %s: %v %s", cache, err, data)
	}
	e := entries[bin]
	if len(e.SHA256) != 64 {
		t.Fatalf("cache entry %+v", e)
	}
	e.SHA256 = strings.Repeat("ab", 32)
	entries[bin] = e
	data, _ = json.Marshal(entries)
	os.WriteFile(cache, data, 0o600)
	if got := binaryIdentity(cache, bin); got != "sha256:"+e.SHA256 {
		t.Errorf("the cache was not used: %s", got)
	}
	// A broken cache is read around.
	os.WriteFile(cache, []byte("{not json"), 0o600)
	if got := binaryIdentity(cache, bin); got == "sha256:"+e.SHA256 || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("with a broken cache: %s", got)
	}
}
