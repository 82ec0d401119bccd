package debug_test

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/gdbmi"
)

// monoNs is CLOCK_MONOTONIC, the clock the editor's uv.hrtime() reads: the
// container shares the host's kernel, so the two compare directly.
func monoNs() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[int(float64(len(s)-1)*p+0.5)]
}

// BenchmarkStopToSign: hazard3-sim, the student types stepi in the gdb
// pane, b.N times. Three figures per stop: keys typed -> the sign moved in
// Neovim (everything: tmux, gdb stepping through QEMU's stub, the bridge,
// the editor; an upper bound for gdb stop -> sign); inside the editor, the
// *stopped record read -> the sign placed; and the sign placed relative to
// another g.sock client's receipt of the same broadcast (about zero, and
// negative when the editor is served first).
func BenchmarkStopToSign(b *testing.B) {
	s := newSession(b, "hazard3-sim", "inf", "bss", "4")
	s.stemctl("build", s.inst)
	s.debug("--no-build")
	s.waitView("the editor connected", func(v editorView) bool { return v.Connected && v.State == "stopped" })
	s.gdb("break main")
	s.gdb("continue")
	s.waitView("the stop in main", func(v editorView) bool { return strings.Contains(v.Signs, "main.c:StemPCBreak@") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := gdbmi.Dial(ctx, filepath.Join(s.dir, "g.sock"))
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var keysToSign, recToSign, inEditor []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before, err := s.view()
		if err != nil {
			b.Fatal(err)
		}
		t0 := monoNs()
		s.gdb("stepi")
		var t1 int64
	wait:
		for {
			select {
			case ev := <-c.Events():
				if ev.Kind == gdbmi.EventStopped {
					t1 = monoNs()
					break wait
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("no stop after stepi %d", i)
			}
		}
		v := s.waitView("the stepi's stop", func(v editorView) bool { return v.Stops > before.Stops })
		keysToSign = append(keysToSign, float64(v.LastSignNs-t0)/1e6)
		recToSign = append(recToSign, float64(v.LastSignNs-t1)/1e6)
		inEditor = append(inEditor, float64(v.LastSignNs-v.LastRxNs)/1e6)
	}
	b.StopTimer()
	b.ReportMetric(percentile(keysToSign, 0.5), "keys-to-sign-p50-ms")
	b.ReportMetric(percentile(keysToSign, 0.9), "keys-to-sign-p90-ms")
	b.ReportMetric(percentile(recToSign, 0.5), "stop-to-sign-p50-ms")
	b.ReportMetric(percentile(recToSign, 0.9), "stop-to-sign-p90-ms")
	b.ReportMetric(percentile(inEditor, 0.5), "in-editor-p50-ms")
}

// BenchmarkDebugReady: `stemctl debug` of an up, built hazard3-sim
// instance, b.N times: until the editor shows the task's first file, and
// until the command returns (the layout's gdb serves its socket, which
// waits for gdb-multiarch to start and attach to QEMU).
func BenchmarkDebugReady(b *testing.B) {
	s := newSession(b, "hazard3-sim", "inf", "bss", "4")
	s.stemctl("build", s.inst)
	var shown, returned []float64
	for i := 0; i < b.N; i++ {
		// The editor back to an empty buffer, the files closed.
		if err := s.v.Command("enew | silent! bwipeout main.c counter.S"); err != nil {
			b.Fatal(err)
		}
		s.waitView("an empty editor", func(v editorView) bool { return v.Cur == "" && !strings.Contains(v.Listed, "main.c") })
		done := make(chan time.Duration, 1)
		t0 := time.Now()
		go func() {
			for time.Since(t0) < 30*time.Second {
				if v, err := s.view(); err == nil && v.Cur == "main.c" {
					done <- time.Since(t0)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			done <- -1
		}()
		s.debug("--no-build")
		returned = append(returned, float64(time.Since(t0))/1e6)
		d := <-done
		if d < 0 {
			b.Fatal("the editor never showed main.c")
		}
		shown = append(shown, float64(d)/1e6)
	}
	b.ReportMetric(percentile(shown, 0.5), "file-shown-p50-ms")
	b.ReportMetric(percentile(returned, 0.5), "debug-returned-p50-ms")
}
