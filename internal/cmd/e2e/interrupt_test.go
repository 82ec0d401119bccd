package e2e_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ctrl-C during `stemctl up`, at each of its steps, leaves nothing that
// later commands trip on: no container without a record (an orphan in
// list), and the next up brings the instance up.
func TestUpInterruptedAtEachStep(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	for _, step := range []string{"creating ", "starting "} {
		t.Run(strings.TrimSpace(step), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), "up", "native-amd64", "demo", "hello", "1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var said []string
			sent := false
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				said = append(said, sc.Text())
				if strings.HasPrefix(sc.Text(), step) {
					cmd.Process.Signal(os.Interrupt)
					sent = true
					break
				}
			}
			for sc.Scan() {
				said = append(said, sc.Text())
			}
			cmd.Wait()
			out := strings.Join(said, "\n")
			if !sent {
				t.Fatalf("up never said %q:\n%s", step, out)
			}
			if strings.Contains(out, "context canceled") || strings.Contains(out, "http://d/") {
				t.Errorf("the interruption is reported as a transport error:\n%s", out)
			}
			// Up waits for the servers after "starting": the signal lands
			// before it is done, and the user is told so.
			if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out, "stemctl: interrupted") {
				t.Errorf("interrupted at %q: exit %d, want 130 and \"stemctl: interrupted\":\n%s", step, code, out)
			}
			r := a.must(0, "list", "--json")
			if strings.Contains(r.Stdout, "orphan") {
				t.Fatalf("interrupted at %q, list shows an orphan:\n%s\nup said:\n%s", step, r.Stdout, out)
			}
			a.must(0, "up", "native-amd64", "demo", "hello", "1")
			a.must(0, "status", inst)
			a.must(0, "rm", inst)
		})
	}
}
