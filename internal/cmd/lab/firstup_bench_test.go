package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// BenchmarkFirstRootlessUp times a student's first `stemctl up` of an
// image: each iteration enrols a new account with `stemctl lab add` (the
// image loaded for it; not timed), leaves it as after a reboot (no
// process of the account, an empty runtime directory), then times its
// first `stemctl up`, process start to exit: stemctl starts the Podman
// service, as on a student's first command of the day. The service's share is read from stemctl's service log of that
// same up and reported apart (service-p50-ms), as is the rest
// (rest-p50-ms: process start, connecting, Manager.Up, exit) and, of it,
// Manager.Up (manager-up-p50-ms: create with any copy Podman makes,
// start, both sockets answering).
//
// Shapes: own, lab's fallback (the account's own image store, images
// stored as the containers' ids); own-unmapped, the own store as lab
// wrote it before (plain overlay: the image unloaded and loaded again
// under it, so Podman copies it for the containers' ids on the first up);
// shared, lab's shared store read through fuse-overlayfs.
func BenchmarkFirstRootlessUp(b *testing.B) {
	needs.Real(b, "Podman, stem's images and real accounts")
	needs.Root(b, "creates accounts")
	bin := readableBin(b)
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	for _, shape := range []string{"own", "own-unmapped", "shared"} {
		b.Run(shape, func(b *testing.B) {
			b.StopTimer()
			img, storeArg := native, "none"
			var store *lab.Shared
			if shape == "shared" {
				img, store = shareableImage(b), sharedStore(b)
				storeArg = store.Root
			}
			labDir := b.TempDir()
			var total, service, rest, inUp []time.Duration
			for i := 0; i < b.N; i++ {
				name := accountName(b)
				out, errOut, code := stemctl(b, bin, "lab", "add", name, "--lab-dir", labDir, "--shared-store", storeArg,
					"--image", img, "--cards", cards, "--host", "labhost", "--json")
				if code != 0 {
					b.Fatalf("lab add: exit %d\n%s\n%s", code, out, errOut)
				}
				if store != nil && img != native && i == 0 {
					sharedPodman(b, store, "tag", img, native)
				}
				a, err := lab.Lookup(name)
				if err != nil {
					b.Fatal(err)
				}
				if shape == "own-unmapped" {
					unmapped(b, a)
				}
				afterBoot(b, a)
				start := time.Now()
				up, err := asAccount(context.Background(), a, filepath.Join(bin, "stemctl"), "up", "native-amd64", "demo", "hello", "1", "--json")
				d := time.Since(start)
				if err != nil {
					b.Fatalf("first up: %v", err)
				}
				var res struct {
					Action   string        `json:"action"`
					Duration time.Duration `json:"duration_ns"`
				}
				if err := json.Unmarshal([]byte(up), &res); err != nil || res.Action != "created" {
					b.Fatalf("first up: %v\n%s", err, up)
				}
				svc, err := serviceStart(a)
				if err != nil {
					b.Fatal(err)
				}
				copied, err := mappedCopy(a)
				if err != nil {
					b.Fatal(err)
				}
				// The control: the plain store does copy the image, so the
				// own shape's absence of a copy is stem's doing.
				if want := shape == "own-unmapped"; copied != want {
					b.Fatalf("%s: Podman made a mapped copy of the image: %v, want %v", shape, copied, want)
				}
				total, service, rest, inUp = append(total, d), append(service, svc), append(rest, d-svc), append(inUp, res.Duration)
				if _, err := lab.Remove(context.Background(), &lab.Options{Dir: b.TempDir(), TmpfilesDir: "/etc/tmpfiles.d", Lock: "/run/stem-lab.lock"}, name, time.Now()); err != nil {
					b.Fatalf("remove %s: %v", name, err)
				}
			}
			b.ReportMetric(p50ms(total), "p50-ms")
			b.ReportMetric(p50ms(service), "service-p50-ms")
			b.ReportMetric(p50ms(rest), "rest-p50-ms")
			b.ReportMetric(p50ms(inUp), "manager-up-p50-ms")
		})
	}
}

// unmapped gives the account the storage.conf lab wrote before images
// were stored as the containers' ids, and loads the image again under it.
func unmapped(b *testing.B, a *lab.Account) {
	b.Helper()
	ctx := context.Background()
	id, err := asAccount(ctx, a, "podman", "image", "inspect", "--format", "{{.Id}}", native)
	if err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join("/var/cache/stem/images", strings.TrimSpace(id)+".tar")
	conf := filepath.Join(a.Home, ".config", "containers", "storage.conf")
	for _, args := range [][]string{
		{"podman", "rmi", native},
		{"sh", "-c", `printf '[storage]\ndriver = "overlay"\n' > "$1"`, "sh", conf},
		{"podman", "load", "-q", "-i", archive},
	} {
		if _, err := asAccount(ctx, a, args[0], args[1:]...); err != nil {
			b.Fatal(err)
		}
	}
}

// afterBoot leaves the account as a reboot would, for the first up of
// the day: none of its processes (Podman's pause process, which holds
// the account's user namespace, stays after lab's image load), an empty
// runtime directory (a tmpfs) and nothing waiting to be written to disk
// (lab's image load leaves the image's files to the kernel's writeback,
// which a first up would otherwise wait for in Podman's fsyncs).
func afterBoot(b *testing.B, a *lab.Account) {
	b.Helper()
	defer syscall.Sync()
	for deadline := time.Now().Add(30 * time.Second); ; {
		pids := processesOf(a.UID)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s's processes %v outlive SIGKILL", a.Name, pids)
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ents, err := os.ReadDir(a.Runtime())
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(a.Runtime(), e.Name())); err != nil {
			b.Fatal(err)
		}
	}
}

// processesOf lists the pids whose real uid is uid.
func processesOf(uid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 && f[0] == strconv.Itoa(uid) {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

var answered = regexp.MustCompile(`(?m)^--- answered after ([0-9]+) ms$`)

// serviceStart is how long the Podman service stemctl started took to
// answer, from stemctl's log of it.
func serviceStart(a *lab.Account) (time.Duration, error) {
	p := filepath.Join(a.Home, ".local", "state", "stem", "podman-service.log")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("the service log: %w", err)
	}
	m := answered.FindAllSubmatch(data, -1)
	if len(m) != 1 {
		return 0, fmt.Errorf("%s: %d services started, want 1:\n%s", p, len(m), data)
	}
	ms, _ := strconv.Atoi(string(m[0][1]))
	return time.Duration(ms) * time.Millisecond, nil
}

// mappedCopy says whether Podman keeps a copy of an image of the
// account's own store for another id mapping (containers/storage's
// images.json: "mapped-layers").
func mappedCopy(a *lab.Account) (bool, error) {
	data, err := os.ReadFile(filepath.Join(a.Home, ".local", "share", "containers", "storage", "overlay-images", "images.json"))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var imgs []struct {
		Mapped []string `json:"mapped-layers"`
	}
	if err := json.Unmarshal(data, &imgs); err != nil {
		return false, fmt.Errorf("images.json: %w", err)
	}
	for _, i := range imgs {
		if len(i.Mapped) > 0 {
			return true, nil
		}
	}
	return false, nil
}

func p50ms(s []time.Duration) float64 {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2].Microseconds()) / 1000
}
