package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// benchStudents is a class's size.
const benchStudents = 30

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchImage builds ref FROM img with a version label: the "new image"
// an update rolls out. Root's cached archive of it goes at the end.
func benchImage(b *testing.B, img, ref, version string) {
	b.Helper()
	build := exec.Command("podman", "build", "-q", "-t", ref, "-f", "-", b.TempDir())
	build.Stdin = strings.NewReader("FROM " + img + "\nLABEL org.opencontainers.image.version=" + version + "\n")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v %s", ref, err, out)
	}
	id, _ := exec.Command("podman", "image", "inspect", "--format", "{{.Id}}", ref).Output()
	b.Cleanup(func() {
		os.Remove(filepath.Join("/var/cache/stem/images", strings.TrimPrefix(strings.TrimSpace(string(id)), "sha256:")+".tar"))
	})
}

// BenchmarkLabThirty (minutes; one iteration is one class): one `lab
// import` of a CSV of 30 new students onto a shared image store, each
// student's first `stemctl up` (four at a time, as the thirty-student
// test), the disk each student costs, `lab status` of the 30, and `lab
// update` of the 30 after the image changed. The accounts are removed
// at the end of the iteration.
func BenchmarkLabThirty(b *testing.B) {
	needs.Real(b, "Podman, stem's images, fuse-overlayfs and 30 real accounts")
	needs.Root(b, "creates accounts")
	bin := readableBin(b)
	img := shareableImage(b)
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	ctx := context.Background()
	var enrol, status, update []time.Duration
	var ups []time.Duration
	var home, store []int64
	for range b.N {
		b.StopTimer()
		st := sharedStore(b)
		labDir := b.TempDir()
		csv := "name,full name,email\n"
		var names []string
		for i := range benchStudents {
			n := accountName(b)
			names = append(names, n)
			csv += fmt.Sprintf("%s,Student %d,s%d@school.example\n", n, i, i)
		}
		list := filepath.Join(b.TempDir(), "class.csv")
		os.WriteFile(list, []byte(csv), 0o644)
		b.StartTimer()

		t0 := time.Now()
		out, errOut, code := stemctl(b, bin, "lab", "import", list, "--lab-dir", labDir, "--shared-store", st.Root,
			"--image", img, "--cards", cards, "--host", "labhost", "--json")
		enrol = append(enrol, time.Since(t0))
		if code != 0 {
			b.Fatalf("lab import: exit %d\n%s\n%s", code, out, errOut)
		}
		if img != native {
			sharedPodman(b, st, "tag", img, native)
		}
		var accts []*lab.Account
		for _, n := range names {
			a, err := lab.Lookup(n)
			if err != nil {
				b.Fatal(err)
			}
			accts = append(accts, a)
		}
		var mu sync.Mutex
		noErrors(b, "stemctl up", asEach(accts, func(a *lab.Account) error {
			t0 := time.Now()
			if _, err := asAccount(ctx, a, filepath.Join(bin, "stemctl"), "up", "native-amd64", "demo", "hello", "1"); err != nil {
				return err
			}
			mu.Lock()
			ups = append(ups, time.Since(t0))
			mu.Unlock()
			return nil
		}))
		var h int64
		for _, a := range accts {
			h += duBytes(b, a.Home)
		}
		home = append(home, h/benchStudents)
		store = append(store, duBytes(b, st.Root))

		t0 = time.Now()
		out, errOut, code = stemctl(b, bin, "lab", "status", "--lab-dir", labDir, "--shared-store", st.Root, "--json")
		status = append(status, time.Since(t0))
		var sts []lab.Status
		if err := json.Unmarshal([]byte(out), &sts); err != nil || code != 0 || len(sts) != benchStudents {
			b.Fatalf("lab status: exit %d %v\n%s\n%s", code, err, out, errOut)
		}

		// The changed image: version 1 rolled out first (untimed), then
		// version 2, as after a rebuild.
		b.StopTimer()
		ref := "localhost/stemlabbench-" + strings.TrimPrefix(names[0], student.Prefix) + ":latest"
		b.Cleanup(func() { exec.Command("podman", "rmi", "-f", ref).Run() })
		upd := func(version string) time.Duration {
			benchImage(b, img, ref, version)
			t0 := time.Now()
			out, errOut, code := stemctl(b, bin, "lab", "update", "--lab-dir", labDir, "--shared-store", st.Root, "--image", ref, "--json")
			d := time.Since(t0)
			if code != 0 {
				b.Fatalf("lab update: exit %d\n%s\n%s", code, out, errOut)
			}
			return d
		}
		upd("1")
		b.StartTimer()
		update = append(update, upd("2"))
		b.StopTimer()
		// The accounts go now, not at the benchmark's end: the next
		// iteration makes thirty more.
		for _, n := range names {
			lab.Remove(ctx, &lab.Options{Dir: b.TempDir(), TmpfilesDir: "/etc/tmpfiles.d", Lock: "/run/stem-lab.lock"}, n, time.Now())
		}
		b.StartTimer()
	}
	slices.Sort(ups)
	b.ReportMetric(msOf(median(enrol))/1000, "enrol30-s")
	b.ReportMetric(msOf(median(enrol))/benchStudents, "enrol-per-student-ms")
	b.ReportMetric(msOf(ups[len(ups)/2]), "first-up-p50-ms")
	b.ReportMetric(msOf(ups[len(ups)-1]), "first-up-max-ms")
	b.ReportMetric(msOf(median(status))/1000, "status30-s")
	b.ReportMetric(msOf(median(update))/1000, "update30-s")
	b.ReportMetric(float64(medianI(home))/1024, "home-KB")
	b.ReportMetric(float64(medianI(store))/(1<<20), "store-MB")
	b.ReportMetric((float64(medianI(home))+float64(medianI(store))/benchStudents)/(1<<20), "disk-per-student-MB")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianI(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLabCompile: the task's `make` (demo/hello task 1, from `make
// clean`) in a running instance of an account reading the shared store
// through fuse-overlayfs beside one with its own copy of the image
// (kernel overlay), timed inside the container; paired in each iteration.
func BenchmarkLabCompile(b *testing.B) {
	needs.Real(b, "Podman, stem's images, fuse-overlayfs and 2 real accounts")
	needs.Root(b, "creates accounts")
	bin := readableBin(b)
	img := shareableImage(b)
	st := sharedStore(b)
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	ctx := context.Background()
	shared, own := accountName(b), accountName(b)
	for _, c := range []struct{ name, store string }{{shared, st.Root}, {own, "none"}} {
		out, errOut, code := stemctl(b, bin, "lab", "add", c.name, "--lab-dir", b.TempDir(), "--shared-store", c.store,
			"--image", img, "--cards", cards, "--json")
		if code != 0 {
			b.Fatalf("lab add %s: exit %d\n%s\n%s", c.name, code, out, errOut)
		}
	}
	if img != native {
		sharedPodman(b, st, "tag", img, native)
	}
	accts := map[string]*lab.Account{}
	for _, n := range []string{shared, own} {
		a, err := lab.Lookup(n)
		if err != nil {
			b.Fatal(err)
		}
		if img != native && n == own {
			if _, err := asAccount(ctx, a, "podman", "tag", img, native); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := asAccount(ctx, a, filepath.Join(bin, "stemctl"), "up", "native-amd64", "demo", "hello", "1"); err != nil {
			b.Fatal(err)
		}
		accts[n] = a
	}
	// One make, in ns, timed by the container's own clock.
	const script = `make clean >/dev/null && s=$(date +%s%N) && make >/dev/null && e=$(date +%s%N) && echo $((e - s))`
	makeOnce := func(a *lab.Account) time.Duration {
		out, err := asAccount(ctx, a, filepath.Join(bin, "stemctl"), "exec", "native-amd64-demo-hello-t1", "--tty", "never", "--", "sh", "-c", script)
		if err != nil {
			b.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			b.Fatalf("make's time: %q", out)
		}
		return time.Duration(ns)
	}
	first := map[string]time.Duration{shared: makeOnce(accts[shared]), own: makeOnce(accts[own])}
	var sh, ow []time.Duration
	b.ResetTimer()
	for range b.N {
		sh = append(sh, makeOnce(accts[shared]))
		ow = append(ow, makeOnce(accts[own]))
	}
	b.ReportMetric(msOf(median(sh)), "shared-make-ms")
	b.ReportMetric(msOf(median(ow)), "own-make-ms")
	b.ReportMetric(msOf(first[shared]), "shared-first-make-ms")
	b.ReportMetric(msOf(first[own]), "own-first-make-ms")
}
