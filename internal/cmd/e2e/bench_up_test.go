package e2e_test

import (
	"sort"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// BenchmarkUpNew times `stemctl up` of a new instance (image built, no
// container), process start to exit (both sockets answer by then), as
// root with root's Podman and as a non-root student with rootless Podman.
// The first up of each account is not timed: it starts the account's
// Podman service.
func BenchmarkUpNew(b *testing.B) {
	testenv.Binary(b, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(b, "stem-mcp", "./cmd/stem-mcp")
	for _, mode := range []string{"rootful", "rootless"} {
		b.Run(mode, func(b *testing.B) {
			var a *testenv.Account
			if mode == "rootless" {
				a = student.Get(b, "localhost/stem-native-amd64:latest").Account(b, bin)
			} else {
				a = testenv.NewAccount(b, bin, testenv.AccountOptions{})
			}
			up := func() time.Duration {
				start := time.Now()
				r, err := a.Run(nil, "up", "native-amd64", "demo", "hello", "1")
				d := time.Since(start)
				if err != nil || r.Code != 0 {
					b.Fatalf("up: %v %d %s", err, r.Code, r.Stderr)
				}
				if r, _ := a.Run(nil, "rm", "native-amd64-demo-hello-t1"); r.Code != 0 {
					b.Fatalf("rm: %s", r.Stderr)
				}
				return d
			}
			b.StopTimer()
			up()
			samples := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				samples = append(samples, up())
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
