package instance_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/instance"
)

func pct(samples []time.Duration, p float64) float64 {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return float64(samples[min(len(samples)-1, int(float64(len(samples))*p))].Microseconds()) / 1000
}

// BenchmarkUpCreate: `up` with the image built and no container, to both
// sockets answering.
func BenchmarkUpCreate(b *testing.B) {
	w := newWorld(b)
	w.m.Progress = io.Discard
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		res := w.up(r)
		if res.Action != instance.Created && res.Action != instance.Recreated {
			b.Fatalf("action %s", res.Action)
		}
		samples = append(samples, res.Duration)
		b.StopTimer()
		if _, err := w.m.Remove(context.Background(), res.Record.Instance); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(pct(samples, 0.5), "p50-ms")
	b.ReportMetric(pct(samples, 0.99), "p99-ms")
}

// BenchmarkUpReuse: `up` of a healthy instance (what re-attaching costs
// inside stemctl: resolve, inspect, probe both servers).
func BenchmarkUpReuse(b *testing.B) {
	w := newWorld(b)
	w.m.Progress = io.Discard
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	w.up(r)
	var samples []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := w.up(r)
		if res.Action != instance.Reused {
			b.Fatalf("action %s", res.Action)
		}
		samples = append(samples, res.Duration)
	}
	b.ReportMetric(pct(samples, 0.5), "p50-ms")
	b.ReportMetric(pct(samples, 0.99), "p99-ms")
}

// BenchmarkIdleMemory reports an idle instance's memory: the container's
// cgroup (tmux, nvim, bash, init) and conmon on the host, after the
// instance has settled.
func BenchmarkIdleMemory(b *testing.B) {
	w := newWorld(b)
	w.m.Progress = io.Discard
	for _, prof := range [][]string{{"native-amd64", "demo", "hello", "1"}, {"hazard3-sim", "inf", "bss", "4"}} {
		rec := w.up(w.resolve(prof[0], prof[1], prof[2], prof[3], "")).Record
		time.Sleep(3 * time.Second)
		var cg, rss uint64
		for i := 0; i < b.N; i++ {
			var err error
			cg, err = w.m.Engine.MemoryBytes(context.Background(), rec.ContainerID)
			if err != nil {
				b.Fatal(err)
			}
			rss = conmonRSS(rec.ContainerID)
		}
		b.ReportMetric(float64(cg)/(1<<20), prof[0]+"-cgroup-MiB")
		b.ReportMetric(float64(rss)/(1<<20), prof[0]+"-conmon-MiB")
		b.ReportMetric(float64(cg+rss)/(1<<20), prof[0]+"-total-MiB")
		b.ReportMetric(float64(containerRSS(rec.ContainerID)+rss)/(1<<20), prof[0]+"-rss-upper-MiB")
	}
}

// conmonRSS finds the container's conmon process and returns its RSS.
func conmonRSS(id string) uint64 {
	out, _ := exec.Command("pgrep", "-f", "conmon.*"+id[:12]).Output()
	var total uint64
	for _, f := range strings.Fields(string(out)) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%s/statm", f))
		if err != nil {
			continue
		}
		parts := strings.Fields(string(data))
		if len(parts) > 1 {
			pages, _ := strconv.ParseUint(parts[1], 10, 64)
			total += pages * uint64(os.Getpagesize())
		}
	}
	return total
}

// containerRSS sums the RSS of every process in the container's cgroup: an
// upper bound (shared libraries count once per process).
func containerRSS(id string) uint64 {
	ents, _ := os.ReadDir("/proc")
	var total uint64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/statm")
		if err != nil {
			continue
		}
		parts := strings.Fields(string(data))
		if len(parts) > 1 {
			pages, _ := strconv.ParseUint(parts[1], 10, 64)
			total += pages * uint64(os.Getpagesize())
		}
	}
	return total
}
