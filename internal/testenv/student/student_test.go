package student_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// TestRootlessUp: the student's own stemctl brings an instance up in the
// student's rootless Podman (root's Podman does not have it), as that
// user, and removes it again.
func TestRootlessUp(t *testing.T) {
	if testing.Short() {
		t.Skip("makes an account and runs rootless Podman")
	}
	const img = "localhost/stem-native-amd64:latest"
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	s := student.Get(t, img)
	a := s.Account(t, bin)
	start := time.Now()
	r, err := a.Run(nil, "up", "native-amd64", "demo", "hello", "1")
	if err != nil || r.Code != 0 {
		t.Fatalf("up as %s: %v %d\n%s\n%s", s.Name, err, r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("first up as %s (starts its Podman service): %v", s.Name, time.Since(start))
	r, _ = a.Run(nil, "status", "native-amd64-demo-hello-t1")
	if r.Code != 0 || !strings.Contains(r.Stdout, "state      running") {
		t.Fatalf("status: %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	ctx := context.Background()
	ids, err := s.Podman(ctx, "ps", "-q", "--filter", "label=io.stem.instance=native-amd64-demo-hello-t1")
	if err != nil || ids == "" {
		t.Fatalf("the student's Podman has no such container: %q %v", ids, err)
	}
	out, err := s.Podman(ctx, "exec", ids, "cat", "/proc/self/uid_map")
	if err != nil || strings.HasPrefix(strings.TrimSpace(out), "0          0") {
		t.Fatalf("the container is not in the student's user namespace: %q %v", out, err)
	}
	if r, _ := a.Run(nil, "rm", "native-amd64-demo-hello-t1"); r.Code != 0 {
		t.Fatalf("rm: %s", r.Stderr)
	}
}
