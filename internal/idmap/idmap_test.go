package idmap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func files(t *testing.T, sub string) Files {
	d := t.TempDir()
	f := Files{SubUID: filepath.Join(d, "subuid"), SubGID: filepath.Join(d, "subgid")}
	os.WriteFile(f.SubUID, []byte(sub), 0o644)
	os.WriteFile(f.SubGID, []byte(strings.ReplaceAll(sub, "100000", "200000")), 0o644)
	return f
}

func TestRootless(t *testing.T) {
	f := files(t, "other:300000:65536\nstudent:100000:65536\n1001:500000:1000\n")
	m, err := Rootless(f, "student", "1001")
	if err != nil {
		t.Fatal(err)
	}
	// Container root is the first subordinate id; newuidmap counts the
	// ranges by name and by uid, in file order.
	want := Map{EngineBase: 1, Host: 100000, HostGID: 200000, Size: Size}
	if m != want || !m.Rootless() {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	small, err := Rootless(files(t, "student:100000:1000\n"), "student", "1001")
	if err != nil || small.Size != 1000 {
		t.Fatalf("a short range: %+v %v", small, err)
	}
}

func TestRootlessWithoutSubordinateIDs(t *testing.T) {
	for _, content := range []string{"", "other:100000:65536\n", "student:100000:1\n", ":100000:65536\n"} {
		_, err := Rootless(files(t, content), "", "1001")
		if !errors.Is(err, ErrNoSubordinate) || !strings.Contains(err.Error(), "usermod --add-subuids") || !strings.Contains(err.Error(), "stemctl doctor") {
			t.Errorf("%q: %v", content, err)
		}
	}
	if _, err := Rootless(files(t, "student:x:65536\n"), "student", "1001"); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("malformed line: %v", err)
	}
}

func TestRootful(t *testing.T) {
	m := Map{EngineBase: RootfulBase, Host: RootfulBase, HostGID: RootfulBase, Size: Size}
	if m.Rootless() {
		t.Fatal("rootful taken for rootless")
	}
	if os.Geteuid() == 0 {
		if got, err := ForCaller(); err != nil || got != m {
			t.Fatalf("ForCaller as root: %+v %v", got, err)
		}
	}
}

func TestRootOf(t *testing.T) {
	for in, want := range map[string]uint32{
		"         0     100000      65536\n":                               100000,
		"         0       1001          1\n         1     100000  65536\n": 1001,
		"         1     100000      65536\n":                               0,
		"":                                                                 0,
	} {
		got, ok := RootOf(in)
		if got != want || ok != (want != 0) {
			t.Errorf("RootOf(%q) = %d %v", in, got, ok)
		}
	}
	// This process: the initial namespace maps 0 to 0.
	if err := Check(os.Getpid(), Map{Host: 0}); err != nil {
		t.Fatal(err)
	}
	if err := Check(os.Getpid(), Map{Host: RootfulBase}); err == nil {
		t.Fatal("a process in the initial namespace passed for a mapped container")
	}
}
