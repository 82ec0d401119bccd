// Package needs gates tests on the real programs they run (tmux, Neovim,
// Podman, gdb, sshd, the agent CLIs). Under `go test -short` such tests
// are skipped, so the short tier (`make check`) needs nothing but Go;
// otherwise a missing program fails the test and names the package that
// provides it, because `make test` is meant to run everything.
package needs

import (
	"os"
	"os/exec"
	"testing"
)

// Real skips the test under -short; what names the real parts it needs.
func Real(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short", what)
	}
}

// Program skips the test under -short and otherwise returns the program's
// path, failing the test with the Debian package to install when it is
// missing.
func Program(t testing.TB, program, debianPackage string) string {
	t.Helper()
	Real(t, program)
	p, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s not found in PATH: apt-get install %s (or run `make setup`)", program, debianPackage)
	}
	return p
}

// Root is for tests that act as other uids or make device nodes: as
// another user they skip under -short and fail otherwise (CI runs as
// root, and `make test` is meant to run everything).
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skipf("needs root (%s): skipped under -short", why)
	}
	t.Fatalf("needs root (%s): run the tests as root, as CI does", why)
}
