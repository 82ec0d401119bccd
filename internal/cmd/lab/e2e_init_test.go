package lab_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// initLines are init's step lines, "system: NAME ... RESULT (detail)",
// as NAME → RESULT.
func initLines(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "system: "), " ... ")
		if !ok || !strings.HasPrefix(l, "system: ") {
			t.Fatalf("not a step: %q\n%s", l, out)
		}
		result, _, _ := strings.Cut(rest, " ")
		m[name] = result
	}
	return m
}

// TestLabInitTwice: lab init installs the programs where an ordinary
// account runs them, loads the image into a shared store the account
// starts a container from and records the course's cards, which lab add
// then copies without --cards; a second init changes nothing. A program
// changed since (a new build) is installed again, and nothing else.
func TestLabInitTwice(t *testing.T) {
	needs.Real(t, "Podman, stem's images, fuse-overlayfs and a real account")
	needs.Root(t, "installs programs and fills an image store")
	bin := readableBin(t)
	dial, err := os.ReadFile(filepath.Join(testenv.Binary(t, "stem-dial", "./cmd/stem-dial"), "stem-dial"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "stem-dial"), dial, 0o755); err != nil {
		t.Fatal(err)
	}
	img := shareableImage(t)
	store := sharedStore(t)
	top, err := os.MkdirTemp("", "stemlab-prefix")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	prefix := filepath.Join(top, "bin")
	labDir := t.TempDir()
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	args := []string{"lab", "init", "--prefix", prefix, "--shared-store", store.Root, "--image", img, "--lab-dir", labDir, "--cards", cards}

	out, errOut, code := stemctl(t, bin, args...)
	if code != 0 {
		t.Fatalf("lab init: exit %d\n%s\n%s", code, out, errOut)
	}
	first := initLines(t, out)
	// The control for the second run: the first did the work.
	for _, name := range append(programSteps(), "shared image "+img, "course cards") {
		if first[name] != lab.Done {
			t.Errorf("first init: %s %q\n%s", name, first[name], out)
		}
	}
	if first["fuse"] == "" {
		t.Errorf("no fuse step:\n%s", out)
	}

	out, errOut, code = stemctl(t, bin, args...)
	if code != 0 {
		t.Fatalf("lab init again: exit %d\n%s\n%s", code, out, errOut)
	}
	second := initLines(t, out)
	if len(second) != len(first) {
		t.Errorf("the second init has other steps: %v, first %v", second, first)
	}
	for name, r := range second {
		if r != lab.Already && !(name == "fuse" && r == first[name]) {
			t.Errorf("second init changed %s: %s\n%s", name, r, out)
		}
	}

	// An ordinary account runs the installed programs and starts a
	// container from the shared image with nothing of its own.
	s := student.New(t)
	ctx := context.Background()
	as := func(name string, args ...string) string {
		t.Helper()
		var stderr strings.Builder
		cmd := s.Command(ctx, name, args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %s %v: %v\n%s%s", s.Name, name, args, err, out, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	for _, p := range lab.Programs {
		if fi, err := os.Stat(filepath.Join(prefix, p)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", p, fi, err)
		}
	}
	if v := as(filepath.Join(prefix, "stemctl"), "--version"); !strings.Contains(v, "stemctl") {
		t.Errorf("stemctl --version as %s: %q", s.Name, v)
	}
	if v := as(filepath.Join(prefix, "stem-mcp"), "--version"); v == "" {
		t.Errorf("stem-mcp --version as %s: nothing", s.Name)
	}
	as("sh", "-c", `mkdir -p "$HOME/.config/containers" && printf '%s' "$1" > "$HOME/.config/containers/storage.conf"`, "sh", store.StorageConf())
	rootID, err := exec.Command("podman", "image", "inspect", "--format", "{{.Id}}", img).Output()
	if err != nil {
		t.Fatal(err)
	}
	if id := as("podman", "image", "inspect", "--format", "{{.Id}}", img); id != strings.TrimSpace(string(rootID)) {
		t.Fatalf("%s sees %s as %q, root as %s", s.Name, img, id, rootID)
	}
	if v := as("podman", "run", "--rm", "--network", "none", img, "cat", "/etc/debian_version"); v == "" {
		t.Errorf("the container printed nothing")
	}
	if own := duBytes(t, filepath.Join(s.Home, ".local", "share", "containers")); own > 50<<20 {
		t.Errorf("%s's own storage holds %d MB: the image was copied", s.Name, own>>20)
	}

	// lab add without --cards copies the cards init recorded.
	if src, err := lab.CourseCards(labDir); err != nil || src != cards {
		t.Fatalf("recorded cards %q %v", src, err)
	}
	name := accountName(t)
	out, errOut, code = stemctl(t, bin, "lab", "add", name, "--lab-dir", labDir, "--shared-store", store.Root, "--image", img, "--json")
	if code != 0 {
		t.Fatalf("lab add: exit %d\n%s\n%s", code, out, errOut)
	}
	if st := findStep(t, steps(t, out), name, "cards"); st.Result != lab.Done {
		t.Errorf("cards: %+v", st)
	}
	a, err := lab.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.Home, "dev", "workspace", "stem", "demo", "hello", "stem.toml")); err != nil {
		t.Errorf("the recorded cards did not reach %s: %v", name, err)
	}

	// A new build of one program is installed again; the rest stays.
	if err := os.WriteFile(filepath.Join(bin, "stem-dial"), append(dial, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = stemctl(t, bin, args...)
	if code != 0 {
		t.Fatalf("lab init after a new build: exit %d\n%s\n%s", code, out, errOut)
	}
	third := initLines(t, out)
	if third["install stem-dial"] != lab.Done || third["install stemctl"] != lab.Already || third["shared image "+img] != lab.Already ||
		third["course cards"] != lab.Already {
		t.Errorf("after a new stem-dial: %v\n%s", third, out)
	}
}

func programSteps() []string {
	var s []string
	for _, p := range lab.Programs {
		s = append(s, "install "+p)
	}
	return s
}
