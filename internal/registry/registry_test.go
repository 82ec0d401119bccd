package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPutGetFindDelete(t *testing.T) {
	ctx := context.Background()
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", 32)
	if err := r.Put(ctx, Record{Instance: "native-amd64-demo-hello-t1", ContainerID: id}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(ctx, "native-amd64-demo-hello-t1")
	if err != nil || got.ContainerID != id || got.Created.IsZero() {
		t.Fatalf("get: %+v %v", got, err)
	}
	for _, ref := range []string{"native-amd64-demo-hello-t1", id, id[:12]} {
		if got, err := r.Find(ctx, ref); err != nil || got.ContainerID != id {
			t.Fatalf("find %q: %v", ref, err)
		}
	}
	if _, err := r.Find(ctx, id[:6]); err == nil {
		t.Fatal("a 6-digit prefix must not match")
	}
	if _, err := r.Find(ctx, "nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "native-amd64-demo-hello-t1") {
		t.Fatalf("unknown instance error should list known ones: %v", err)
	}
	if err := r.Delete(ctx, "native-amd64-demo-hello-t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "native-amd64-demo-hello-t1"); !errors.Is(err, ErrNotFound) {
		t.Fatal("record survived delete")
	}
}

func TestAmbiguousPrefix(t *testing.T) {
	ctx := context.Background()
	r, _ := Open(t.TempDir())
	r.Put(ctx, Record{Instance: "a", ContainerID: "0123456789ab" + strings.Repeat("1", 52)})
	r.Put(ctx, Record{Instance: "b", ContainerID: "0123456789ab" + strings.Repeat("2", 52)})
	if _, err := r.Find(ctx, "0123456789ab"); err == nil || !strings.Contains(err.Error(), "matches 2") {
		t.Fatalf("ambiguous prefix: %v", err)
	}
}

func TestCorruptRegistryIsNotOverwritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r, _ := Open(dir)
	os.WriteFile(r.Path(), []byte("{\"instances\": {"), 0o600)
	if err := r.Put(ctx, Record{Instance: "x"}); err == nil || !strings.Contains(err.Error(), "is not valid JSON (line 1") {
		t.Fatalf("put on corrupt registry: %v", err)
	}
	if b, _ := os.ReadFile(r.Path()); string(b) != "{\"instances\": {" {
		t.Fatal("corrupt registry was rewritten")
	}
}

func TestFailedUpdateWritesNothing(t *testing.T) {
	ctx := context.Background()
	r, _ := Open(t.TempDir())
	r.Put(ctx, Record{Instance: "keep"})
	err := r.Update(ctx, func(m map[string]Record) error {
		delete(m, "keep")
		return errors.New("changed my mind")
	})
	if err == nil {
		t.Fatal("update error lost")
	}
	if _, err := r.Get(ctx, "keep"); err != nil {
		t.Fatal("a failed update changed the file")
	}
}

func TestLockTimeout(t *testing.T) {
	r, _ := Open(t.TempDir())
	hold := make(chan struct{})
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		r.Update(context.Background(), func(map[string]Record) error {
			close(hold)
			<-done
			return nil
		})
	}()
	<-hold
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := r.Put(ctx, Record{Instance: "x"})
	close(done)
	<-finished // the holder still writes; let it finish before TempDir cleanup
	if err == nil || time.Since(start) > 2*time.Second || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("lock wait: %v after %s", err, time.Since(start))
	}
}

// TestManyProcessWriters runs real processes (this test binary re-executed)
// that each add records concurrently; none may be lost.
func TestManyProcessWriters(t *testing.T) {
	dir := t.TempDir()
	procs, each := 8, 20
	if testing.Short() { // the race detector makes each process slow
		procs, each = 4, 10
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "STEM_REGISTRY_WRITER="+strconv.Itoa(p), "STEM_REGISTRY_DIR="+dir, "STEM_REGISTRY_EACH="+strconv.Itoa(each))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("writer %d: %v\n%s", p, err, out)
			}
		}(p)
	}
	// Concurrent goroutine writers in this process too.
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r, _ := Open(dir)
			for i := 0; i < each; i++ {
				if err := r.Put(context.Background(), Record{Instance: fmt.Sprintf("g%d-%d", g, i)}); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, _ := Open(dir)
	recs, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := procs*each + 4*each; len(recs) != want {
		t.Fatalf("%d records, want %d: writers lost updates", len(recs), want)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".registry.json.tmp*")); len(ents) != 0 {
		t.Fatalf("temp files left: %v", ents)
	}
}

// TestMain doubles as the writer process for TestManyProcessWriters.
func TestMain(m *testing.M) {
	if p := os.Getenv("STEM_REGISTRY_WRITER"); p != "" {
		os.Exit(writer(p))
	}
	os.Exit(m.Run())
}

func writer(p string) int {
	each, _ := strconv.Atoi(os.Getenv("STEM_REGISTRY_EACH"))
	r, err := Open(os.Getenv("STEM_REGISTRY_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; i < each; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := r.Put(ctx, Record{Instance: fmt.Sprintf("p%s-%d", p, i)})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestLockInstanceRefusesPathNames(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "a\x00b"} {
		if unlock, err := r.LockInstance(context.Background(), bad); err == nil {
			unlock()
			t.Errorf("LockInstance(%q) accepted", bad)
		}
	}
	unlock, err := r.LockInstance(context.Background(), "native-amd64-demo-hello-t1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.LockInstance(ctx, "native-amd64-demo-hello-t1"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a held instance lock was taken again: %v", err)
	}
}
