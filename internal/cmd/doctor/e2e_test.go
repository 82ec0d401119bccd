package doctor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cmddoctor "github.com/stem-edu/stem/internal/cmd/doctor"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}

const native = "localhost/stem-native-amd64:latest"

// doctorJSON runs the account's stemctl doctor --json; want is the exit
// code it must end with.
func doctorJSON(t *testing.T, a *testenv.Account, want int) cmddoctor.Report {
	t.Helper()
	r, err := a.Run(nil, "doctor", "--json")
	if err != nil || r.Code != want {
		t.Fatalf("doctor: %v, exit %d (want %d)\n%s\n%s", err, r.Code, want, r.Stdout, r.Stderr)
	}
	var rep cmddoctor.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r.Stdout)
	}
	return rep
}

// labDoctor runs root's stemctl lab doctor NAME --json (bin must be
// readable by the account: it runs this stemctl as NAME). The account
// keeps its own images: no shared store.
func labDoctor(t *testing.T, bin, name string, want int) cmddoctor.Report {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd := exec.Command(filepath.Join(bin, "stemctl"), "lab", "doctor", name, "--json", "--shared-store", "none", "--lab-dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("lab doctor %s: exit %d (want %d)\n%s\n%s", name, code, want, stdout.String(), stderr.String())
	}
	var rep cmddoctor.Report
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("lab doctor --json: %v\n%s", err, stdout.String())
	}
	return rep
}

func check(t *testing.T, rep cmddoctor.Report, name string) doctor.Result {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, rep.Checks)
	return doctor.Result{}
}

// requiredOK fails the test for every required check that is not OK.
func requiredOK(t *testing.T, rep cmddoctor.Report) {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Required && c.Status != doctor.OK {
			t.Errorf("%s: %s: %s (fix %s)", c.Name, c.Status, c.Detail, c.Fix)
		}
	}
}

// TestDoctorAccounts runs the built stemctl doctor as root (this machine
// has everything: it passes) and as a fresh student account from which
// one requirement is taken away in turn: each is named with its fix, and
// the account passes once it has them all.
func TestDoctorAccounts(t *testing.T) {
	needs.Real(t, "Podman, stem's images and new accounts")
	needs.Root(t, "makes accounts with useradd")
	testenv.RequireAccount(t)
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")

	t.Run("root", func(t *testing.T) {
		rep := doctorJSON(t, testenv.NewAccount(t, bin, testenv.AccountOptions{}), 0)
		requiredOK(t, rep)
		if c := check(t, rep, "runtime"); !strings.Contains(c.Detail, "started on host ids 2000000000") {
			t.Errorf("runtime: %+v", c)
		}
	})

	s := student.New(t)
	a := s.Account(t, bin)
	t.Run("student without images", func(t *testing.T) {
		rep := doctorJSON(t, a, 1)
		c := check(t, rep, "image native-amd64")
		if c.Status != doctor.Fail || !c.Required || !strings.Contains(c.Fix, "podman load -i /var/tmp/stem-native-amd64.tar") {
			t.Errorf("%+v", c)
		}
		if c := check(t, rep, "subordinate-ids"); c.Status != doctor.OK {
			t.Errorf("%+v", c)
		}
	})
	if err := s.Load(native); err != nil {
		t.Fatal(err)
	}
	t.Run("student ready", func(t *testing.T) {
		rep := doctorJSON(t, a, 0)
		requiredOK(t, rep)
		if c := check(t, rep, "runtime"); c.Status != doctor.OK || !strings.Contains(c.Detail, native) {
			t.Errorf("runtime: %+v", c)
		}
	})
	t.Run("lab doctor of a ready student", func(t *testing.T) {
		// lab doctor uses the account's own default workspace.
		ws := filepath.Join(s.Home, "dev", "workspace", "stem")
		if out, err := exec.Command("sh", "-c", `mkdir -p "$1" && cp -a "$2"/. "$1"/ && chown -R "$3" "$4"`, "sh",
			ws, filepath.Join(testenv.RepoRoot(), "examples", "workspace"), fmt.Sprintf("%d:%d", s.UID, s.GID), filepath.Join(s.Home, "dev")).CombinedOutput(); err != nil {
			t.Fatalf("workspace: %v %s", err, out)
		}
		rep := labDoctor(t, a.Bin, s.Name, 0)
		requiredOK(t, rep)
		if rep.User != s.Name || rep.UID != s.UID || !strings.Contains(check(t, rep, "workspace").Detail, ws) {
			t.Errorf("not run as %s (%d): %+v", s.Name, s.UID, rep)
		}
	})
	t.Run("student without a runtime directory", func(t *testing.T) {
		away := s.Runtime + ".away"
		if err := os.Rename(s.Runtime, away); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(away, s.Runtime)
		rep := doctorJSON(t, a, 1)
		c := check(t, rep, "runtime-dir")
		if c.Status != doctor.Fail || c.Fix != fmt.Sprintf("(as root) install -d -m 0700 -o %s -g %d %s", s.Name, s.GID, s.Runtime) {
			t.Errorf("%+v", c)
		}
	})
	t.Run("student without subordinate ids", func(t *testing.T) {
		// usermod changes no ids of an account with processes (its
		// Podman): a second account, before it runs anything.
		s2 := student.New(t)
		a2 := s2.Account(t, bin)
		usermod(t, "--del-subuids", subLine(t, "/etc/subuid", s2.Name), "--del-subgids", subLine(t, "/etc/subgid", s2.Name), s2.Name)
		for _, rep := range []cmddoctor.Report{doctorJSON(t, a2, 1), labDoctor(t, a2.Bin, s2.Name, 1)} {
			c := check(t, rep, "subordinate-ids")
			if c.Status != doctor.Fail || !strings.Contains(c.Fix, "usermod --add-subuids ") || !strings.HasSuffix(c.Fix, " "+s2.Name) {
				t.Errorf("%+v", c)
			}
		}
	})
}

// subLine is name's range in an /etc/subuid-style file as FIRST-LAST.
func subLine(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		var start, count int
		if f := strings.Split(l, ":"); len(f) == 3 && f[0] == name {
			fmt.Sscan(f[1], &start)
			fmt.Sscan(f[2], &count)
			return fmt.Sprintf("%d-%d", start, start+count-1)
		}
	}
	t.Fatalf("%s has no line in %s", name, file)
	return ""
}

func usermod(t *testing.T, args ...string) {
	t.Helper()
	if err := student.Passwd("usermod", args...); err != nil {
		t.Error(err)
	}
}
