package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/testenv"
)

// BenchmarkAttachRelay measures `stemctl attach` on a real pty: the time
// for `cat` of 10 MB in a pane to finish on the terminal, and keystroke
// echo (a key written to the pty until the pane's echo comes back). With
// STEM_ATTACH_BASELINE set to another stemctl binary (today's relay, built
// from an earlier commit), it measures that one too, side by side.
func BenchmarkAttachRelay(b *testing.B) {
	testenv.RequireAccount(b)
	testenv.Binary(b, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(b, "stem-mcp", "./cmd/stem-mcp")
	a := &account{Account: testenv.NewAccount(b, bin, testenv.AccountOptions{Env: []string{"TERM=xterm"}})}
	inst := "native-amd64-demo-hello-t1"
	if r, err := a.Run(nil, "up", "native-amd64", "demo", "hello", "1"); err != nil || r.Code != 0 {
		b.Fatalf("up: %v %+v", err, r)
	}
	r, _ := a.Run(nil, "status", inst, "--json")
	sock := socketOf(b, r.Stdout)
	cid := containerOf(b, r.Stdout)
	if out, err := exec.Command("podman", "exec", cid, "sh", "-c", "head -c 7500000 /dev/urandom | base64 -w 118 > /tmp/10mb").CombinedOutput(); err != nil {
		b.Fatalf("make the 10 MB file: %v %s", err, out)
	}
	bins := map[string]string{"relay": filepath.Join(bin, "stemctl")}
	if base := os.Getenv("STEM_ATTACH_BASELINE"); base != "" {
		bins["baseline"] = base
	}
	for name, stemctl := range bins {
		b.Run(name, func(b *testing.B) {
			exec.Command("tmux", "-S", sock, "kill-window", "-t", "stem:bench").Run()
			exec.Command("tmux", "-S", sock, "new-window", "-n", "bench", "sh").Run()
			before := clientCount(sock)()
			cmd := exec.Command(stemctl, "attach", inst)
			cmd.Env = a.Env
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				// Detach, so the client in the container ends with it.
				f.Write([]byte{0x02, 'd'})
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					<-done
				}
				f.Close()
			}()
			screen := record(f)
			waitBench(b, "the client attached", func() bool { return clientCount(sock)() > before })
			var cats, echoes []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := screen.mark()
				start := time.Now()
				f.Write([]byte("cat /tmp/10mb; echo CAT-$((6*7))-DONE\r"))
				waitBench(b, "cat to finish", screen.showsAfter(m, "CAT-42-DONE"), screen)
				cats = append(cats, time.Since(start))
				for k := 0; k < 20; k++ {
					m := screen.mark()
					start := time.Now()
					f.Write([]byte("q"))
					waitBench(b, "the echo", screen.showsAfter(m, "q"), screen)
					echoes = append(echoes, time.Since(start))
				}
				f.Write([]byte("\x15")) // C-u: the shell forgets the q's
			}
			b.StopTimer()
			b.ReportMetric(median(cats).Seconds()*1000, "cat10MB-ms")
			b.ReportMetric(float64(median(echoes).Microseconds())/1000, "echo-ms")
		})
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func waitBench(b *testing.B, what string, ok func() bool, screen ...*screen) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			if len(screen) > 0 {
				screen[0].mu.Lock()
				t := screen[0].buf.String()
				screen[0].mu.Unlock()
				b.Logf("the terminal's last bytes: %q", t[max(0, len(t)-600):])
			}
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func socketOf(tb testing.TB, status string) string {
	i := strings.Index(status, `"socket_dir": "`)
	if i < 0 {
		tb.Fatalf("no socket_dir in %s", status)
	}
	rest := status[i+len(`"socket_dir": "`):]
	return filepath.Join(rest[:strings.IndexByte(rest, '"')], "t.sock")
}

func containerOf(tb testing.TB, status string) string {
	i := strings.Index(status, `"container_id": "`)
	if i < 0 {
		tb.Fatalf("no container_id in %s", status)
	}
	rest := status[i+len(`"container_id": "`):]
	return rest[:strings.IndexByte(rest, '"')]
}
