package e2e_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/testenv"
)

// BenchmarkAttach times `stemctl attach` of a healthy instance from process
// start until tmux lists the new terminal client (the student's terminal is
// live), through a real pseudo-terminal.
func BenchmarkAttach(b *testing.B) {
	testenv.RequireAccount(b)
	testenv.Binary(b, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(b, "stem-mcp", "./cmd/stem-mcp") // the binaries' directory
	stemctl := filepath.Join(bin, "stemctl")
	a := testenv.NewAccount(b, bin, testenv.AccountOptions{Env: []string{"TERM=xterm"}})
	const inst = "native-amd64-demo-hello-t1"
	if r, err := a.Run(nil, "up", "native-amd64", "demo", "hello", "1"); err != nil || r.Code != 0 {
		b.Fatalf("up: %v %+v", err, r)
	}
	r, err := a.Run(nil, "status", inst, "--json")
	if err != nil || r.Code != 0 {
		b.Fatalf("status: %v %+v", err, r)
	}
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	json.Unmarshal([]byte(r.Stdout), &st)
	sock := filepath.Join(st.Record.SocketDir, "t.sock")
	attached := func() bool {
		out, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode}").Output()
		return strings.Contains(string(out), "0")
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(stemctl, "attach", inst)
		cmd.Env = a.Env
		start := time.Now()
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
		if err != nil {
			b.Fatal(err)
		}
		go func() { // keep the pty drained so tmux never blocks on output
			buf := make([]byte, 4096)
			for {
				if _, err := f.Read(buf); err != nil {
					return
				}
			}
		}()
		for !attached() {
			if time.Since(start) > 10*time.Second {
				b.Fatal("no client attached within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		samples = append(samples, time.Since(start))
		f.Write([]byte{0x02, 'd'})
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			b.Fatal("attach did not end after detach")
		}
		f.Close()
		for attached() { // the next sample starts with no client
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
}
