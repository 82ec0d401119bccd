package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// A command $STEM_TEST_BIN_DIR holds is copied, not built: the copy is the
// file that directory holds. Anything else (a package outside ./cmd, a
// command the directory lacks) is built as before.
func TestBinaryTakesThePrebuiltCommand(t *testing.T) {
	dir := t.TempDir()
	want := []byte("#!/bin/sh\necho prebuilt\n")
	if err := os.WriteFile(filepath.Join(dir, "stemctl"), want, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinDirEnv, "")
	if got := prebuilt("./cmd/stemctl"); got != "" {
		t.Fatalf("without %s: prebuilt %q", BinDirEnv, got)
	}
	t.Setenv(BinDirEnv, dir)
	for pkg, want := range map[string]string{
		"./cmd/stemctl":                       filepath.Join(dir, "stemctl"),
		"./cmd/stem-dial":                     "",
		"./internal/agent/testdata/mcpclient": "",
		"./cmd/stemctl/../../x":               "",
	} {
		if got := prebuilt(pkg); got != want {
			t.Errorf("prebuilt(%s) = %q, want %q", pkg, got, want)
		}
	}
	t.Cleanup(RemoveBinaries)
	got, err := os.ReadFile(filepath.Join(Binary(t, "stemctl", "./cmd/stemctl"), "stemctl"))
	if err != nil || string(got) != string(want) {
		t.Fatalf("Binary's stemctl: %q %v, want the prebuilt file", got, err)
	}
}
