package xdg

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPrecedence(t *testing.T) {
	rt := t.TempDir()
	d, err := Resolve(FromMap(map[string]string{"HOME": "/home/s", "XDG_RUNTIME_DIR": rt}))
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "/home/s/.local/state/stem" || d.Config != "/home/s/.config/stem" || d.Runtime != rt {
		t.Fatalf("defaults: %+v", d)
	}
	d, _ = Resolve(FromMap(map[string]string{"HOME": "/home/s", "XDG_RUNTIME_DIR": rt, "XDG_STATE_HOME": "/x/state", "XDG_CONFIG_HOME": "/x/config"}))
	if d.State != "/x/state/stem" || d.Config != "/x/config/stem" {
		t.Fatalf("XDG vars: %+v", d)
	}
	d, _ = Resolve(FromMap(map[string]string{"HOME": "/home/s", "XDG_RUNTIME_DIR": rt, "XDG_STATE_HOME": "/x/state", "STEM_STATE_DIR": "/y/s/", "STEM_CONFIG_DIR": "/y/c"}))
	if d.State != "/y/s" || d.Config != "/y/c" {
		t.Fatalf("STEM_ overrides: %+v", d)
	}
	// A relative XDG_STATE_HOME is ignored, as the spec says.
	d, _ = Resolve(FromMap(map[string]string{"HOME": "/home/s", "XDG_RUNTIME_DIR": rt, "XDG_STATE_HOME": "rel"}))
	if d.State != "/home/s/.local/state/stem" {
		t.Fatalf("relative XDG_STATE_HOME: %+v", d)
	}
	if _, err := Resolve(FromMap(map[string]string{"HOME": "/home/s", "XDG_RUNTIME_DIR": "relative"})); err == nil {
		t.Fatal("a relative XDG_RUNTIME_DIR was accepted")
	}
}

func TestFallbackRuntime(t *testing.T) {
	d, err := Resolve(FromMap(map[string]string{"HOME": "/home/s"}))
	want := filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	if err != nil {
		// Only acceptable when /run/user cannot be created here.
		if !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") {
			t.Fatalf("fallback error does not say what to do: %v", err)
		}
		return
	}
	if d.Runtime != want {
		t.Fatalf("fallback runtime %s, want %s", d.Runtime, want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Fatalf("fallback runtime not created: %v", err)
	}
}

// FromMap builds a Getenv over a map.
func FromMap(m map[string]string) Getenv {
	return func(k string) string { return m[k] }
}
