package class

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClassUnderAttack: stem-mcp class with a class of 30, calm (30
// honest stand-in students) and under attack (29 and one hostile gate that
// floods the teacher's side with 1 MB requests and stops reading). It
// reports class_overview's p50 over the open sessions once mallory has
// been cut off, the peak RSS of stem-mcp class from its start, and the
// time from SIGTERM to its exit.
func BenchmarkClassUnderAttack(b *testing.B) {
	for _, mode := range []string{"calm", "attack"} {
		b.Run(mode, func(b *testing.B) {
			honest, extra := 30, []string(nil)
			if mode == "attack" {
				honest, extra = 29, []string{"hostile-flood1"}
			}
			mcpBin, env := benchClassWith(b, honest, extra...)
			p := startClass(b, mcpBin, env, "--timeout", "20s")
			stop := peakRSS(p.cmd.Process.Pid)
			for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
				ov, up, cut := p.overview(b, false), 0, mode == "calm"
				for _, l := range ov.Sessions {
					if l.Connected && strings.HasPrefix(l.Student, "s") {
						up++
					}
					if l.Student == "hostile-flood1" && l.CutOff {
						cut = true
					}
				}
				if up == honest && cut {
					break
				}
				if time.Now().After(deadline) {
					stop()
					p.stop()
					b.Fatalf("%d of %d sessions open, hostile cut off: %v", up, honest, cut)
				}
			}
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				p.overview(b, false)
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			peak := stop()
			t0 := time.Now()
			p.cmd.Process.Signal(syscall.SIGTERM)
			if !p.exited() {
				b.Fatal("stem-mcp class still ran a minute after SIGTERM")
			}
			b.ReportMetric(p50(took), "p50-ms")
			b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
			b.ReportMetric(time.Since(t0).Seconds(), "exit-s")
		})
	}
}

// BenchmarkServeUnderAttack: `stemctl class serve` with a class of 30,
// calm and with one student flooding. It reports the peak RSS from its
// start to the end of b.N fetches of the tiles, and the time from SIGTERM
// to its exit.
func BenchmarkServeUnderAttack(b *testing.B) {
	for _, mode := range []string{"calm", "attack"} {
		b.Run(mode, func(b *testing.B) {
			honest, extra, hostile := 30, []string(nil), ""
			if mode == "attack" {
				honest, extra, hostile = 29, []string{"hostile-flood1"}, "hostile-flood1"
			}
			_, env := benchClassWith(b, honest, extra...)
			cmd, url := startServe(b, env)
			stop := peakRSS(cmd.Process.Pid)
			if tiles, ok := waitTiles(cmd, url, honest, hostile); !ok {
				stop()
				b.Fatalf("tiles: %+v", tiles)
			}
			b.ResetTimer()
			for range b.N {
				fetchTiles(url)
			}
			b.StopTimer()
			peak := stop()
			t0 := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			if !ended(cmd) {
				b.Fatal("class serve still ran a minute after SIGTERM")
			}
			b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
			b.ReportMetric(time.Since(t0).Seconds(), "exit-s")
		})
	}
}
