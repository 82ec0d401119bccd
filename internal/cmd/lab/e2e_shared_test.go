package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// nodev is the native image built on a base without device nodes, for
// hosts whose localhost/stem-native-amd64:latest still carries them (a
// base made by build-base.sh before it left ./dev out).
const nodev = "localhost/stem-native-amd64:nodev"

// shareableImage is the native image the shared store can hold: the
// profile's own when its layers carry no device node (force_mask cannot
// keep a device's owner), else nodev.
func shareableImage(t testing.TB) string {
	t.Helper()
	dir, err := exec.Command("podman", "image", "mount", native).Output()
	if err != nil {
		t.Fatalf("podman image mount %s: %v", native, err)
	}
	defer exec.Command("podman", "image", "unmount", native).Run()
	if fi, err := os.Lstat(filepath.Join(strings.TrimSpace(string(dir)), "dev", "full")); err != nil || fi.Mode()&os.ModeDevice == 0 {
		return native
	}
	if !lab.HasRootImage(context.Background(), nodev) {
		t.Fatalf("%s carries device nodes and %s is missing: rebuild the images on a base from scripts/build-base.sh", native, nodev)
	}
	return nodev
}

// sharedStore is a shared image store of the test's own (not the
// machine's), removed at the end.
func sharedStore(t testing.TB) *lab.Shared {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "stemlab-store")
	if err != nil {
		t.Fatal(err)
	}
	s := lab.DefaultShared
	s.Root, s.RunRoot, s.UdevRule = filepath.Join(dir, "storage"), filepath.Join(dir, "storage.run"), ""
	t.Cleanup(func() {
		exec.Command("umount", filepath.Join(s.Root, "overlay")).Run()
		os.RemoveAll(dir)
	})
	return &s
}

// sharedPodman runs root's Podman on the test's store.
func sharedPodman(t testing.TB, s *lab.Shared, args ...string) string {
	t.Helper()
	full := append([]string{"--root", s.Root, "--runroot", s.RunRoot, "--storage-driver", "overlay",
		"--storage-opt", "overlay.force_mask=shared", "--storage-opt", "overlay.mount_program=" + s.MountProgram}, args...)
	out, err := exec.Command("podman", full...).Output()
	exec.Command("umount", filepath.Join(s.Root, "overlay")).Run()
	if err != nil {
		t.Fatalf("podman %v: %v", args, err)
	}
	exec.Command("chmod", "-R", "a+rX", s.Root).Run()
	return strings.TrimSpace(string(out))
}

// asEach runs fn for every account, four at a time (a lab machine has
// few cores; thirty Podman services at once would only queue).
func asEach(accts []*lab.Account, fn func(a *lab.Account) error) []error {
	errs := make([]error, len(accts))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, a := range accts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := fn(a); err != nil {
				errs[i] = fmt.Errorf("%s: %w", a.Name, err)
			}
		}()
	}
	wg.Wait()
	return errs
}

func asAccount(ctx context.Context, a *lab.Account, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := a.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %v: %w: %s", name, args, err, stderr.String())
	}
	return stdout.String(), nil
}

func noErrors(t testing.TB, what string, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestLabClassOfStudents: one lab import of a class list makes every
// account read one shared image store; a second import changes nothing;
// every student brings a task up and passes doctor; the teacher's class
// import takes the roster; lab update rolls a changed image out to all
// and leaves their edits; --prune keeps a replaced image a container still
// uses and removes it once none does. Ten accounts (more than the four
// lab status checks at once); BenchmarkLabThirty takes a class of thirty
// through the same steps, and STEM_LAB_STUDENTS sets the size here.
func TestLabClassOfStudents(t *testing.T) {
	needs.Real(t, "Podman, stem's images, fuse-overlayfs and real accounts")
	needs.Root(t, "creates accounts")
	n := 10
	if v, err := strconv.Atoi(os.Getenv("STEM_LAB_STUDENTS")); err == nil && v > 0 {
		n = v
	}
	bin := readableBin(t)
	img := shareableImage(t)
	store := sharedStore(t)
	labDir := t.TempDir()
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	csv := "name,full name,email\n"
	names := accountNames(t, n)
	for i, name := range names {
		csv += fmt.Sprintf("%s,Student %d,s%d@school.example\n", name, i, i)
	}
	list := filepath.Join(t.TempDir(), "class.csv")
	os.WriteFile(list, []byte(csv), 0o644)
	args := []string{"lab", "import", list, "--lab-dir", labDir, "--shared-store", store.Root, "--image", img,
		"--cards", cards, "--host", "labhost", "--json"}

	start := time.Now()
	out, errOut, code := stemctl(t, bin, args...)
	enrol := time.Since(start)
	if code != 0 {
		t.Fatalf("lab import: exit %d\n%s\n%s", code, out, errOut)
	}
	var loaded time.Duration
	for _, s := range steps(t, out) {
		switch {
		case s.Name == "shared image "+img:
			if s.Result != lab.Done {
				t.Fatalf("the shared store was not filled: %+v", s)
			}
			// "ID copied into DIR in N s"
			if f, err := strconv.ParseFloat(strings.TrimSuffix(s.Detail[strings.LastIndex(s.Detail, " in ")+4:], " s"), 64); err == nil {
				loaded = time.Duration(f * float64(time.Second))
			}
		case s.Name == "podman config" && !strings.Contains(s.Detail, "shared image store "+store.Root):
			t.Errorf("%s does not read the shared store: %+v", s.Account, s)
		case s.Name == "image "+img && (s.Result == lab.Failed || !strings.Contains(s.Detail, "shared store")):
			t.Errorf("%s's image: %+v", s.Account, s)
		}
	}
	t.Logf("lab import of %d new accounts: %v (the shared load %v of it; %v each after)", n, enrol, loaded, (enrol-loaded)/time.Duration(n))
	if t.Failed() {
		t.FailNow()
	}
	if img != native {
		// stemctl up asks for the profile's name; only the test's store
		// gets it, root's images stay as they are.
		sharedPodman(t, store, "tag", img, native)
	}

	start = time.Now()
	out, errOut, code = stemctl(t, bin, args...)
	if code != 0 {
		t.Fatalf("lab import again: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, s := range steps(t, out) {
		if s.Result != lab.Already && s.Result != lab.Skipped {
			t.Errorf("second import changed %s: %+v", s.Account, s)
		}
	}
	t.Logf("second import: %v", time.Since(start))

	var accts []*lab.Account
	for _, name := range names {
		a, err := lab.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		accts = append(accts, a)
	}
	ctx := context.Background()
	var mu sync.Mutex
	var ups []time.Duration
	start = time.Now()
	noErrors(t, "stemctl up", asEach(accts, func(a *lab.Account) error {
		t0 := time.Now()
		if _, err := asAccount(ctx, a, filepath.Join(bin, "stemctl"), "up", "native-amd64", "demo", "hello", "1"); err != nil {
			return err
		}
		mu.Lock()
		ups = append(ups, time.Since(t0))
		mu.Unlock()
		st, err := asAccount(ctx, a, filepath.Join(bin, "stemctl"), "status", "native-amd64-demo-hello-t1")
		if err == nil && !strings.Contains(st, "state      running") {
			err = fmt.Errorf("status:\n%s", st)
		}
		return err
	}))
	t.Logf("first stemctl up of %d freshly enrolled students, 4 at a time: %v in all, each %v", n, time.Since(start), ups)

	var home, own int64
	for _, a := range accts {
		home += duBytes(t, a.Home)
		own += duBytes(t, filepath.Join(a.Home, ".local", "share", "containers"))
	}
	shared := duBytes(t, store.Root)
	t.Logf("disk: shared store %d MB; per student %d KB in the home (%d KB of it Podman's) after one up, %d MB with 1/%d of the store",
		shared>>20, home/int64(n)>>10, own/int64(n)>>10, (home+shared)/int64(n)>>20, n)

	start = time.Now()
	out, errOut, code = stemctl(t, bin, "lab", "status", "--lab-dir", labDir, "--shared-store", store.Root, "--json")
	var sts []lab.Status
	if err := json.Unmarshal([]byte(out), &sts); err != nil || code != 0 || len(sts) != n {
		t.Fatalf("lab status: exit %d %v\n%s\n%s", code, err, out, errOut)
	}
	for _, s := range sts {
		var sharedOK bool
		for _, c := range s.Checks {
			sharedOK = sharedOK || (c.Name == "shared-store" && c.Status == "ok" && strings.Contains(c.Detail, store.Root))
		}
		if !s.Ready || !sharedOK {
			t.Errorf("%s: ready %v, shared store ok %v, missing %v", s.Name, s.Ready, sharedOK, s.Missing)
		}
	}
	t.Logf("lab status (doctor as each of %d): %v", n, time.Since(start))

	teacher := []string{"STEM_CONFIG_DIR=" + t.TempDir()}
	for _, args := range [][]string{{"class", "init", "labclass"}, {"class", "import", "labclass", lab.RosterPath(labDir)}} {
		if out, errOut, code := stemctlEnv(t, bin, teacher, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	out, errOut, code = stemctlEnv(t, bin, teacher, "class", "list", "labclass", "--json")
	var roster struct{ Students []struct{ Name, Host string } }
	if err := json.Unmarshal([]byte(out), &roster); err != nil || code != 0 || len(roster.Students) != n {
		t.Fatalf("class list: exit %d %v\n%s\n%s", code, err, out, errOut)
	}

	// Each student edits the card; lab update must leave that alone.
	card := func(a *lab.Account) string { return filepath.Join(a.Home, "dev", "workspace", "stem", "demo", "hello") }
	noErrors(t, "edit", asEach(accts, func(a *lab.Account) error {
		_, err := asAccount(ctx, a, "sh", "-c", `echo "mine $1" >> "$2/stem.toml"`, "sh", a.Name, card(a))
		return err
	}))
	ref := "localhost/stemlabclass-" + strings.TrimPrefix(names[0], student.Prefix) + ":latest"
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", ref).Run() })
	update := func(version string, extra ...string) (string, []lab.Step) {
		t.Helper()
		build := exec.Command("podman", "build", "-q", "-t", ref, "-f", "-", t.TempDir())
		build.Stdin = strings.NewReader("FROM " + img + "\nLABEL org.opencontainers.image.version=" + version + "\n")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v %s", ref, err, out)
		}
		idb, _ := exec.Command("podman", "image", "inspect", "--format", "{{.Id}}", ref).Output()
		id := strings.TrimSpace(string(idb))
		t.Cleanup(func() { os.Remove(filepath.Join("/var/cache/stem/images", strings.TrimPrefix(id, "sha256:")+".tar")) })
		start := time.Now()
		out, errOut, code := stemctl(t, bin, append([]string{"lab", "update", "--lab-dir", labDir, "--shared-store", store.Root,
			"--image", ref, "--cards", cards, "--json"}, extra...)...)
		if code != 0 {
			t.Fatalf("lab update: exit %d\n%s\n%s", code, out, errOut)
		}
		t.Logf("lab update of %d accounts to %s version %s %v: %v", n, ref, version, extra, time.Since(start))
		return id, steps(t, out)
	}
	v1, _ := update("1")
	v2, st := update("2")
	for _, s := range st {
		if s.Name == "cards" && s.Result != lab.Already {
			t.Errorf("update touched %s's cards: %+v", s.Account, s)
		}
	}
	noErrors(t, "after update", asEach(accts, func(a *lab.Account) error {
		id, err := asAccount(ctx, a, "podman", "image", "inspect", "--format", "{{.Id}}", ref)
		if err != nil || strings.TrimSpace(id) != v2 {
			return fmt.Errorf("sees %s %q, not version 2 %s: %v", ref, id, v2, err)
		}
		data, err := asAccount(ctx, a, "cat", filepath.Join(card(a), "stem.toml"))
		if err != nil || !strings.HasSuffix(data, "mine "+a.Name+"\n") {
			return fmt.Errorf("the student's edit is gone: %v\n%s", err, data)
		}
		return nil
	}))

	// A container of version 2 keeps it through version 3 and --prune;
	// version 1, which nothing uses, goes (the control: prune does
	// remove a replaced image).
	if _, err := asAccount(ctx, accts[0], "podman", "create", "--name", "keeps-v2", "--network", "none", ref, "true"); err != nil {
		t.Fatal(err)
	}
	_, st = update("3", "--prune")
	prune := findStep(t, st, "system", "prune shared store")
	have := sharedPodman(t, store, "images", "-a", "--no-trunc", "--format", "{{.ID}}")
	if prune.Result != lab.Done || strings.Contains(have, strings.TrimPrefix(v1, "sha256:")) {
		t.Errorf("prune left version 1 %s: %+v\n%s", v1, prune, have)
	}
	if !strings.Contains(have, strings.TrimPrefix(v2, "sha256:")) {
		t.Fatalf("prune removed version 2, which a container uses: %+v\n%s", prune, have)
	}
	if _, err := asAccount(ctx, accts[0], "podman", "rm", "keeps-v2"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = stemctl(t, bin, "lab", "update", "--lab-dir", labDir, "--shared-store", store.Root, "--image", ref, "--prune", "--json")
	if code != 0 {
		t.Fatalf("lab update --prune: exit %d\n%s\n%s", code, out, errOut)
	}
	if have := sharedPodman(t, store, "images", "-a", "--no-trunc", "--format", "{{.ID}}"); strings.Contains(have, strings.TrimPrefix(v2, "sha256:")) {
		t.Fatalf("prune kept version 2 after its container went: %+v\n%s", findStep(t, steps(t, out), "system", "prune shared store"), have)
	}
}

func findStep(t testing.TB, st []lab.Step, account, name string) lab.Step {
	t.Helper()
	for _, s := range st {
		if s.Account == account && s.Name == name {
			return s
		}
	}
	t.Fatalf("no step %s %s: %+v", account, name, st)
	return lab.Step{}
}

// duBytes is the disk dir uses, in bytes (du -s).
func duBytes(t testing.TB, dir string) int64 {
	t.Helper()
	out, _ := exec.Command("du", "-s", "-B1", "-x", dir).Output()
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("du %s: no answer", dir)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("du %s: %q", dir, out)
	}
	return n
}
