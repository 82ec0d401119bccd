package lab_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBinaries()
	os.Exit(code)
}

const native = "localhost/stem-native-amd64:latest"

// readableBin copies stemctl and stem-mcp where every account can run
// them (the test build directory is root's alone), as an administrator
// installs them in /usr/local/bin.
func readableBin(t testing.TB) string {
	t.Helper()
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	built := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	dir, err := os.MkdirTemp("", "stemlab-bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	// cp, not a write of this process's: a child forked meanwhile would
	// hold the file open for writing, and running it fails "text file busy".
	for _, n := range []string{"stemctl", "stem-mcp"} {
		if out, err := exec.Command("cp", "--", filepath.Join(built, n), filepath.Join(dir, n)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", n, err, out)
		}
		os.Chmod(filepath.Join(dir, n), 0o755)
	}
	return dir
}

// stemctl runs root's stemctl and returns its stdout and exit code.
func stemctl(t testing.TB, bin string, args ...string) (string, string, int) {
	t.Helper()
	return stemctlEnv(t, bin, nil, args...)
}

// stemctlEnv is stemctl with env added to root's environment.
func stemctlEnv(t testing.TB, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "stemctl"), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("stemctl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

func steps(t testing.TB, out string) []lab.Step {
	t.Helper()
	var s []lab.Step
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("steps: %v\n%s", err, out)
	}
	return s
}

// accountName is a fresh account name; the account is removed (as lab rm
// would, without the archive) when the test ends.
func accountName(t testing.TB) string {
	return accountNames(t, 1)[0]
}

// accountNames are n fresh account names, whose accounts are removed side
// by side when the test ends: one at a time, thirty took over a minute.
func accountNames(t testing.TB, n int) []string {
	names := make([]string, n)
	for i := range names {
		b := make([]byte, 4)
		rand.Read(b)
		names[i] = student.Prefix + "l" + hex.EncodeToString(b)
	}
	t.Cleanup(func() {
		o := &lab.Options{Dir: t.TempDir(), TmpfilesDir: "/etc/tmpfiles.d", Lock: "/run/stem-lab.lock"}
		var made []*lab.Account
		for _, name := range names {
			if a, err := lab.Lookup(name); err == nil && a.UID >= 1000 {
				made = append(made, a)
			}
		}
		asEach(made, func(a *lab.Account) error {
			_, err := lab.Remove(context.Background(), o, a.Name, time.Now())
			return err
		})
	})
	return names
}

// TestLabAddTwice: without a shared image store (each account loads its
// own copy, lab's fallback when FUSE is not usable), lab add prepares two
// new accounts (with the teacher's
// grant), a second run changes nothing, each account passes doctor,
// sees the grant as its own and brings a task up rootless in the
// workspace lab filled; the teacher's class import takes the roster; lab
// update rolls a changed image out and leaves the student's card alone;
// lab rm archives the student's edits, then removes the account.
func TestLabAddTwice(t *testing.T) {
	needs.Real(t, "Podman, stem's images and real accounts")
	needs.Root(t, "creates accounts")
	bin := readableBin(t)
	labDir := t.TempDir()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	spk, _ := ssh.NewPublicKey(pub)
	key := filepath.Join(t.TempDir(), "kow.pub")
	os.WriteFile(key, ssh.MarshalAuthorizedKey(spk), 0o600)
	a, b := accountName(t), accountName(t)
	cards := filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	args := []string{"lab", "add", a, b, "--lab-dir", labDir, "--shared-store", "none", "--cards", cards, "--image", native,
		"--grant", key, "--teacher", "kow", "--level", "observe", "--host", "labhost", "--json"}

	start := time.Now()
	out, errOut, code := stemctl(t, bin, args...)
	enrol := time.Since(start)
	if code != 0 {
		t.Fatalf("lab add: exit %d\n%s\n%s", code, out, errOut)
	}
	done := map[string]int{}
	for _, s := range steps(t, out) {
		if s.Result == lab.Done {
			done[s.Account]++
		}
		if s.Name == "podman config" && !strings.Contains(s.Detail, "own image store") {
			t.Errorf("%s: %+v", s.Account, s)
		}
	}
	// The control for the second run: the first did change each account.
	if done[a] < 7 || done[b] < 7 {
		t.Fatalf("first run did little: %v\n%s", done, out)
	}
	t.Logf("enrolment of 2 new accounts with %s: %v (%v each)", native, enrol, enrol/2)

	start = time.Now()
	out, errOut, code = stemctl(t, bin, args...)
	if code != 0 {
		t.Fatalf("lab add again: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, s := range steps(t, out) {
		if s.Result != lab.Already {
			t.Errorf("second run changed %s: %+v", s.Account, s)
		}
	}
	t.Logf("second run: %v", time.Since(start))

	// An account lab enrolled before it stored images as the containers'
	// ids gets the new storage.conf; one the student wrote stays.
	bAcct, err := lab.Lookup(b)
	if err != nil {
		t.Fatal(err)
	}
	bConf := filepath.Join(bAcct.Home, ".config", "containers", "storage.conf")
	bIDs, err := idmap.Rootless(idmap.DefaultFiles, b, strconv.Itoa(bAcct.UID))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ have, want, result string }{
		{"[storage]\ndriver = \"overlay\"\n", doctor.OwnStorageConf(bIDs), lab.Done},
		{"[storage]\ndriver = \"vfs\"\n", "[storage]\ndriver = \"vfs\"\n", lab.Already},
	} {
		if out, err := bAcct.Command(context.Background(), "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", c.have, bConf).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		out, errOut, code := stemctl(t, bin, "lab", "add", b, "--lab-dir", labDir, "--shared-store", "none", "--image", native, "--host", "labhost", "--json")
		if code != 0 {
			t.Fatalf("lab add %s: exit %d\n%s\n%s", b, code, out, errOut)
		}
		st := findStep(t, steps(t, out), b, "podman config")
		if data, _ := os.ReadFile(bConf); st.Result != c.result || string(data) != c.want {
			t.Errorf("storage.conf %q: %+v, now\n%s", c.have, st, data)
		}
	}
	if out, err := bAcct.Command(context.Background(), "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", doctor.OwnStorageConf(bIDs), bConf).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	// No --shared-store: status takes the store add was given (none).
	out, errOut, code = stemctl(t, bin, "lab", "status", "--lab-dir", labDir, "--json")
	var sts []lab.Status
	if err := json.Unmarshal([]byte(out), &sts); err != nil || code != 0 || len(sts) != 2 {
		t.Fatalf("lab status: exit %d %v\n%s\n%s", code, err, out, errOut)
	}
	for _, s := range sts {
		if !s.Ready || s.Host != s.Name+"@labhost" {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}

	acct, err := lab.Lookup(a)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := acct.Command(ctx, filepath.Join(bin, "stemctl"), args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: stemctl %v: %v\n%s\n%s", a, args, err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	var grants []access.GrantStatus
	if err := json.Unmarshal([]byte(run("access", "list", "--json")), &grants); err != nil || len(grants) != 1 ||
		grants[0].Name != "kow" || grants[0].Level != "observe" || grants[0].Lines != 1 {
		t.Fatalf("the student's grants: %+v %v", grants, err)
	}
	start = time.Now()
	run("up", "native-amd64", "demo", "hello", "1")
	t.Logf("first stemctl up of a freshly enrolled student: %v", time.Since(start))
	if st := run("status", "native-amd64-demo-hello-t1"); !strings.Contains(st, "state      running") {
		t.Fatalf("status:\n%s", st)
	}
	// The image was stored as the containers' ids when lab loaded it:
	// the first up used it as it is (BenchmarkFirstRootlessUp's
	// own-unmapped shape is the control, where Podman copies it).
	m, err := idmap.Rootless(idmap.DefaultFiles, acct.Name, strconv.Itoa(acct.UID))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(acct.Home, ".config", "containers", "storage.conf")
	if data, err := os.ReadFile(conf); err != nil || string(data) != doctor.OwnStorageConf(m) {
		t.Errorf("%s: %v\n%s", conf, err, data)
	}
	if copied, err := mappedCopy(acct); err != nil || copied {
		t.Errorf("the first up made a copy of the image for the containers' ids (%v)", err)
	}
	card := filepath.Join(acct.Home, "dev", "workspace", "stem", "demo", "hello")
	if _, err := acct.Command(context.Background(), "sh", "-c", `echo mine > "$1/EDIT"`, "sh", card).CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	if du, err := exec.Command("du", "-s", "--block-size=1M", acct.Home).Output(); err == nil {
		t.Logf("disk of %s after enrolment and one up: %s MB", a, strings.Fields(string(du))[0])
	}

	// The roster is class import's.
	data, err := os.ReadFile(lab.RosterPath(labDir))
	if err != nil || !strings.Contains(string(data), a+","+a+"@labhost\n") || !strings.Contains(string(data), b+","+b+"@labhost\n") {
		t.Fatalf("roster: %v\n%s", err, data)
	}
	// The teacher imports it as it is.
	teacher := []string{"STEM_CONFIG_DIR=" + t.TempDir()}
	for _, args := range [][]string{{"class", "init", "labtest"}, {"class", "import", "labtest", lab.RosterPath(labDir)}} {
		if out, errOut, code := stemctlEnv(t, bin, teacher, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	out, errOut, code = stemctlEnv(t, bin, teacher, "class", "list", "labtest", "--json")
	var roster struct {
		Students []struct{ Name, Host string }
	}
	if err := json.Unmarshal([]byte(out), &roster); err != nil || code != 0 || len(roster.Students) != 2 ||
		roster.Students[0].Host != roster.Students[0].Name+"@labhost" {
		t.Fatalf("class list: exit %d %v\n%s\n%s", code, err, out, errOut)
	}

	// lab update: a changed image reaches the account, the student's
	// edit stays, and a second update changes nothing.
	bCard := filepath.Join(bAcct.Home, "dev", "workspace", "stem", "demo", "hello")
	if out, err := bAcct.Command(context.Background(), "sh", "-c", `echo mine >> "$1/stem.toml"`, "sh", bCard).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(bCard, "stem.toml"))
	ref := "localhost/stemlab-test-" + strings.TrimPrefix(a, student.Prefix) + ":latest"
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", ref).Run() })
	update := func(version string) []lab.Step {
		t.Helper()
		build := exec.Command("podman", "build", "-q", "-t", ref, "-f", "-", t.TempDir())
		build.Stdin = strings.NewReader("FROM " + native + "\nLABEL org.opencontainers.image.version=" + version + "\n")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v %s", ref, err, out)
		}
		id, _ := exec.Command("podman", "image", "inspect", "--format", "{{.Id}}", ref).Output()
		t.Cleanup(func() { os.Remove(filepath.Join("/var/cache/stem/images", strings.TrimSpace(string(id))+".tar")) })
		start := time.Now()
		out, errOut, code := stemctl(t, bin, "lab", "update", "--lab-dir", labDir, "--shared-store", "none", "--image", ref, "--cards", cards, "--json")
		if code != 0 {
			t.Fatalf("lab update: exit %d\n%s\n%s", code, out, errOut)
		}
		t.Logf("lab update of 2 accounts to %s %s: %v", ref, version, time.Since(start))
		return steps(t, out)
	}
	imageStep := func(st []lab.Step, who string) lab.Step {
		for _, s := range st {
			if s.Account == who && s.Name == "image "+ref {
				return s
			}
		}
		t.Fatalf("no image step for %s: %+v", who, st)
		return lab.Step{}
	}
	update("1")
	st := update("2")
	if s := imageStep(st, b); s.Result != lab.Done {
		t.Fatalf("the changed image did not reach %s: %+v", b, s)
	}
	label, err := bAcct.Command(context.Background(), "podman", "image", "inspect", "--format", `{{index .Labels "org.opencontainers.image.version"}}`, ref).Output()
	if err != nil || strings.TrimSpace(string(label)) != "2" {
		t.Fatalf("%s's %s is version %q: %v", b, ref, label, err)
	}
	for _, s := range st {
		if s.Name == "cards" && s.Result != lab.Already {
			t.Errorf("update touched the cards: %+v", s)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(bCard, "stem.toml")); !bytes.Equal(before, after) {
		t.Fatalf("update changed the student's card:\n%s", after)
	}
	out, errOut, code = stemctl(t, bin, "lab", "update", "--lab-dir", labDir, "--shared-store", "none", "--image", ref, "--json")
	if code != 0 {
		t.Fatalf("lab update again: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, s := range steps(t, out) {
		if s.Result != lab.Already && s.Result != lab.Skipped {
			t.Errorf("second update changed %s: %+v", s.Account, s)
		}
	}

	// An archive that cannot be written leaves the account as it is.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "archive"), nil, 0o600)
	if out, errOut, code := stemctl(t, bin, "lab", "rm", b, "--lab-dir", bad); code == 0 {
		t.Fatalf("rm without an archive succeeded:\n%s\n%s", out, errOut)
	}
	if _, err := user.Lookup(b); err != nil {
		t.Fatalf("%s removed although its work was not archived: %v", b, err)
	}

	out, errOut, code = stemctl(t, bin, "lab", "rm", a, "--lab-dir", labDir)
	if code != 0 {
		t.Fatalf("lab rm: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := user.Lookup(a); err == nil {
		t.Fatalf("%s still exists", a)
	}
	if _, err := os.Stat(acct.Runtime()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v", acct.Runtime(), err)
	}
	if sub, _ := os.ReadFile("/etc/subuid"); strings.Contains(string(sub), a+":") {
		t.Errorf("%s keeps its subordinate ids", a)
	}
	if rows, _ := lab.ReadRoster(labDir); len(rows) != 1 || rows[0].Name != b {
		t.Errorf("roster after rm: %+v", rows)
	}
	archives, _ := filepath.Glob(filepath.Join(lab.ArchiveDir(labDir), a+"-*.tar.gz"))
	if len(archives) != 1 {
		t.Fatalf("archives: %v", archives)
	}
	fi, _ := os.Stat(archives[0])
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v", fi.Mode())
	}
	tar := exec.Command("tar", "-xzOf", archives[0], "./dev/workspace/stem/demo/hello/EDIT")
	got, err := tar.Output()
	if err != nil || string(got) != "mine\n" {
		t.Fatalf("the archive lacks the student's edit: %q %v", got, err)
	}
}
