package filelock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExclusiveWaitsAndTimesOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), p, Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Lock(ctx, p, Shared); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a shared lock was granted under an exclusive one: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waited %s past the deadline", d)
	}
	done := make(chan error, 1)
	go func() {
		u, err := Lock(context.Background(), p, Exclusive)
		if err == nil {
			u()
		}
		done <- err
	}()
	// The waiter must still be waiting while the exclusive lock is held.
	select {
	case err := <-done:
		t.Fatalf("a second exclusive lock was granted under the first: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("the waiter did not get the lock after release: %v", err)
	}
}

func TestSharedLocksCoexist(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	a, err := Lock(context.Background(), p, Shared)
	if err != nil {
		t.Fatal(err)
	}
	defer a()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := Lock(ctx, p, Shared)
	if err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	b()
}

func TestRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, nil, 0o600)
	os.Symlink(target, filepath.Join(dir, "x.lock"))
	if _, err := Lock(context.Background(), filepath.Join(dir, "x.lock"), Exclusive); err == nil {
		t.Fatal("locked through a symlink")
	}
}

// A FIFO planted where the lock goes must neither block the open (a FIFO
// opened for reading waits for a writer) nor be taken for a lock.
func TestRefusesFIFOWithoutBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.sock.lock")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Lock(ctx, path, Exclusive)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("lock on a FIFO: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Lock blocked on a FIFO")
	}
}
