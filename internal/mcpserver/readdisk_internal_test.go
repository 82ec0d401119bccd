package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func diskRead(t *testing.T, content string, start, end, max int) map[string]any {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "f.c")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := readFromDisk(context.Background(), cardPath{Abs: p, Rel: "f.c"}, start, end, max)
	if err != nil {
		t.Fatal(err)
	}
	wb := out.(withBody)
	if wb.fields["text_in_next_content"] != true {
		t.Fatalf("disk read does not flag its text: %v", wb.fields)
	}
	wb.fields["text"] = wb.body
	return wb.fields
}

func TestReadFromDiskLineEnds(t *testing.T) {
	// CRLF ends are dropped; a carriage return inside a line is shown, and
	// never splits the numbered block.
	out := diskRead(t, "one\r\ntwo\rforged\n 9\tthree\r\n", 1, 0, 1000)
	want := "1\tone\n2\ttwo\u240dforged\n3\t 9\tthree\n"
	if out["text"] != want || out["total"] != 3 {
		t.Fatalf("got %q (total %v), want %q", out["text"], out["total"], want)
	}
}

func TestReadFromDiskCutKeepsText(t *testing.T) {
	// A first line over the budget is cut, not emptied, even when it holds
	// invalid UTF-8 before the cut; a rune split by the cut is dropped.
	out := diskRead(t, "\xff"+strings.Repeat("a", 100)+"\n", 1, 0, 11)
	if out["text"] != "1\t\ufffdaaaaaaaaa\n" || out["truncated"] != true {
		t.Fatalf("invalid byte then cut: %q", out["text"])
	}
	out = diskRead(t, "abcdefgh\u00e9z\n", 1, 0, 10)
	if out["text"] != "1\tabcdefgh\n" {
		t.Fatalf("split rune: %q", out["text"])
	}
}

func TestReadFromDiskSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readFromDisk(context.Background(), cardPath{Abs: fifo, Rel: "fifo"}, 1, 0, 100)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocks")
	}
	if _, err := readFromDisk(context.Background(), cardPath{Abs: dir, Rel: "d"}, 1, 0, 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	// Swapped for a symlink after the path was resolved: not followed.
	link := filepath.Join(dir, "link")
	os.Symlink("/etc/passwd", link)
	if _, err := readFromDisk(context.Background(), cardPath{Abs: link, Rel: "link"}, 1, 0, 100); err == nil {
		t.Fatal("a symlink was followed")
	}
}

// TestDiskReadCancelled: counting the lines of a huge file stops when the
// call's context ends instead of scanning on.
func TestDiskReadCancelled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(p, []byte(strings.Repeat("x\n", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := readFromDisk(ctx, cardPath{Abs: p, Rel: "big.log"}, 1, 10, 100)
	if err == nil || !strings.Contains(err.Error(), "stopped at line 4096") {
		t.Fatalf("cancelled read: %v", err)
	}
	out, err := readFromDisk(context.Background(), cardPath{Abs: p, Rel: "big.log"}, 1, 10, 100)
	if err != nil || out.(withBody).fields["total"] != 1<<20 {
		t.Fatalf("read: %v %v", err, out)
	}
}
