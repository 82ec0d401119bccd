package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstall: programs are copied once; a changed or missing copy is
// replaced; a program missing at the source fails.
func TestInstall(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "bin")
	for _, p := range Programs {
		os.WriteFile(filepath.Join(src, p), []byte("#!/bin/sh\necho "+p+"\n"), 0o700)
	}
	results := func() map[string]string {
		steps, err := Install(src, dst, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, s := range steps {
			m[s.Name] = s.Result
		}
		return m
	}
	for n, r := range results() {
		if r != Done {
			t.Errorf("first: %s %s", n, r)
		}
	}
	for n, r := range results() {
		if r != Already {
			t.Errorf("second: %s %s", n, r)
		}
	}
	fi, err := os.Stat(filepath.Join(dst, "stem-mcp"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(dst, "stem-mcp"), []byte("old"), 0o755)
	os.Chmod(filepath.Join(dst, "stemctl"), 0o700)
	got := results()
	if got["install stem-mcp"] != Done || got["install stemctl"] != Done || got["install stem-dial"] != Already {
		t.Fatalf("after changes: %v", got)
	}
	os.Remove(filepath.Join(src, "stem-dial"))
	if _, err := Install(src, dst, nil); err == nil {
		t.Fatal("a missing program was not reported")
	}
}
