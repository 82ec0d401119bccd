package audit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

// mountTmpfs mounts a tmpfs of size at a new directory, unmounted at the end.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	needs.Real(t, "a tmpfs mount")
	needs.Root(t, "mount a small tmpfs")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file until the file system is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 512)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return p
		}
	}
}

// An audit log on a disk that fills up while entries are written: the entry
// that does not fit is refused with what to free, no partial line stays in
// the chain, and once space is freed the log continues and verifies.
func TestAuditOnAFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "64k")
	l, err := Open(filepath.Join(dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, Entry{Event: ToolCall, Tool: "pane_capture", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	filler := fill(t, dir)
	// Long entries cross a page boundary on the full tmpfs: the write
	// takes what fits in the last page and fails there.
	long := strings.Repeat("x", maxDetail)
	var werr error
	written := 3
	for i := 0; i < 200 && werr == nil; i++ {
		if _, werr = l.Append(ctx, Entry{Event: ToolIntent, Tool: "pane_send_keys", Detail: long}); werr == nil {
			written++
		}
	}
	var we *WriteError
	if !errors.As(werr, &we) || !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want a WriteError with ENOSPC", werr)
	}
	for _, want := range []string{"is full", "df -h " + filepath.Join(dir, "audit"), "the entry was not written"} {
		if !strings.Contains(werr.Error(), want) {
			t.Errorf("the error %q lacks %q", werr, want)
		}
	}
	res, err := l.Verify()
	if err != nil || !res.OK || res.Lines != written {
		t.Fatalf("after the failed append: %+v %v (want %d whole lines, the chain intact)", res, err, written)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, Entry{Event: ToolCall, Tool: "pane_capture", Result: "ok"}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if res, err := l.Verify(); err != nil || !res.OK || res.Lines != written+1 {
		t.Fatalf("after space was freed: %+v %v", res, err)
	}
}

// A log whose file system turns read-only refuses with what to do and is
// whole again once it is writable.
func TestAuditOnAReadOnlyFileSystem(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	l, _ := Open(filepath.Join(dir, "audit"))
	ctx := context.Background()
	if _, err := l.Append(ctx, Entry{Event: ToolCall, Tool: "pane_capture", Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	_, err := l.Append(ctx, Entry{Event: ToolIntent, Tool: "pane_send_keys"})
	if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "read-only file system") || !strings.Contains(err.Error(), "the entry was not written") {
		t.Fatalf("append on a read-only file system: %v", err)
	}
	if err := l.Check(ctx); err == nil {
		t.Fatal("Check passed on a read-only file system: a server would take the session")
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount rw: %v %s", err, out)
	}
	if _, err := l.Append(ctx, Entry{Event: ToolCall, Tool: "pane_capture", Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Verify(); err != nil || !res.OK || res.Lines != 2 {
		t.Fatalf("after the remount: %+v %v", res, err)
	}
}
