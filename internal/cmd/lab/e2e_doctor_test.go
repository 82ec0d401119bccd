package lab_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cmdlab "github.com/stem-edu/stem/internal/cmd/lab"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// liar is a stemctl the student put first on their PATH: its doctor
// says every check passes, whatever the facts.
const liar = `#!/bin/sh
cat <<'EOF'
{"user":"me","ok":true,"checks":[
{"name":"podman","status":"ok","required":true,"detail":"fine"},
{"name":"subordinate-ids","status":"ok","required":true,"detail":"fine"},
{"name":"runtime-dir","status":"ok","required":true,"detail":"fine"},
{"name":"runtime-dir-lasts","status":"ok","detail":"fine"},
{"name":"workspace","status":"ok","required":true,"detail":"fine"}]}
EOF
`

// labDoctor runs lab doctor in this process, self standing for the
// stemctl it runs as the account; it returns stdout and the exit code.
func labDoctor(t *testing.T, self string, args ...string) (string, int) {
	t.Helper()
	ios, _, stdout, stderr := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: os.Getenv, Self: func() (string, error) { return self, nil }}
	cmd := cmdlab.NewCmdDoctor(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	var ee *cmdutil.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), ee.Code
	case err != nil:
		t.Fatalf("lab doctor %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String(), 0
}

func doctorReport(t *testing.T, out string) map[string]lab.Result {
	t.Helper()
	var rep cmdlab.DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("lab doctor --json: %v\n%s", err, out)
	}
	checks := map[string]lab.Result{}
	for _, c := range rep.Checks {
		checks[c.Name] = c
	}
	return checks
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

// TestLabDoctorDoesNotTrustTheAccount: an account without subordinate
// ids or a runtime directory whose own stemctl doctor (a wrapper on its
// PATH) says everything passes. The control is that answer, which says
// pass; lab doctor says fail for both, answered by root, each with the
// command that fixes it, and after running those commands it says pass.
// The built stemctl's lab doctor, running the real doctor as the account,
// gives root's answers the same way.
func TestLabDoctorDoesNotTrustTheAccount(t *testing.T) {
	needs.Real(t, "real accounts")
	needs.Root(t, "creates accounts and takes their subordinate ids away")
	s := student.New(t)
	ctx := context.Background()
	// usermod changes no ids of an account with processes: this one has
	// run nothing yet.
	if err := student.Passwd("usermod", "--del-subuids", subLine(t, "/etc/subuid", s.Name),
		"--del-subgids", subLine(t, "/etc/subgid", s.Name), s.Name); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(s.Runtime); err != nil {
		t.Fatal(err)
	}
	// The student writes the wrapper and puts it first on their PATH.
	wrapper := filepath.Join(s.Home, "bin", "stemctl")
	put := s.Command(ctx, "sh", "-c", `mkdir -p "$HOME/bin" && cat > "$1" && chmod 0755 "$1" && echo 'PATH="$HOME/bin:$PATH"' >> "$HOME/.profile"`, "sh", wrapper)
	put.Stdin = strings.NewReader(liar)
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("wrapper: %v %s", err, out)
	}

	// The control: the account's own answer says pass.
	own, err := s.Command(ctx, "bash", "-lc", "stemctl doctor --json").Output()
	if err != nil {
		t.Fatalf("the student's stemctl doctor: %v", err)
	}
	var rep struct {
		OK     bool            `json:"ok"`
		Checks []doctor.Result `json:"checks"`
	}
	if err := json.Unmarshal(own, &rep); err != nil || !rep.OK || doctor.Failed(rep.Checks) {
		t.Fatalf("control: the student's doctor does not say pass (%v)\n%s", err, own)
	}

	labDir := t.TempDir()
	args := []string{s.Name, "--lab-dir", labDir, "--shared-store", "none"}
	out, code := labDoctor(t, wrapper, append(args, "--json")...)
	checks := doctorReport(t, out)
	if code != 1 {
		t.Errorf("lab doctor: exit %d, want 1\n%s", code, out)
	}
	fixes := map[string]string{}
	for _, name := range []string{"subordinate-ids", "runtime-dir"} {
		c := checks[name]
		if c.Status != doctor.Fail || c.By != lab.ByRoot || !strings.HasPrefix(c.Fix, "(as root) ") {
			t.Errorf("%s: %+v", name, c)
		}
		fixes[name] = strings.TrimPrefix(c.Fix, "(as root) ")
	}
	if c := checks["subordinate-ids"]; !strings.Contains(c.Fix, "usermod --add-subuids ") || !strings.HasSuffix(c.Fix, " "+s.Name) {
		t.Errorf("subordinate-ids fix: %q", c.Fix)
	}
	if c := checks["runtime-dir"]; c.Fix != fmt.Sprintf("(as root) install -d -m 0700 -o %s -g %d %s", s.Name, s.GID, s.Runtime) {
		t.Errorf("runtime-dir fix: %q", c.Fix)
	}
	// What root cannot check stays the account's answer, marked so.
	if c := checks["podman"]; c.Status != doctor.OK || c.By != lab.ByAccount {
		t.Errorf("podman: %+v", c)
	}

	text, _ := labDoctor(t, wrapper, args...)
	for _, re := range []string{`✗\s+subordinate-ids\s+root\s`, `✗\s+runtime-dir\s+root\s`, `✓\s+podman\s+account\s`,
		`fix: \(as root\) usermod --add-subuids `, `not work until these are fixed: subordinate-ids, runtime-dir\n`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("text lacks %q:\n%s", re, text)
		}
	}

	// Each fix, run as root, is all the check needed.
	for name, fix := range fixes {
		if out, err := exec.Command("sh", "-c", fix).CombinedOutput(); err != nil {
			t.Fatalf("%s's fix %q: %v %s", name, fix, err, out)
		}
	}
	out, code = labDoctor(t, wrapper, append(args, "--json")...)
	checks = doctorReport(t, out)
	// Another package's test may make an account (useradd takes the
	// lowest free range) between the doctor's look and its fix: the
	// doctor then names that overlap, and its own fix for it must do.
	if c := checks["subordinate-ids"]; c.Status == doctor.Fail && strings.Contains(c.Detail, "overlaps "+testenv.AccountPrefix) {
		t.Logf("a test account took ids meanwhile: %s", c.Detail)
		if out, err := exec.Command("sh", "-c", strings.TrimPrefix(c.Fix, "(as root) ")).CombinedOutput(); err != nil {
			t.Fatalf("the overlap's fix %q: %v %s", c.Fix, err, out)
		}
		out, code = labDoctor(t, wrapper, append(args, "--json")...)
		checks = doctorReport(t, out)
	}
	if code != 0 || checks["subordinate-ids"].Status != doctor.OK || checks["runtime-dir"].Status != doctor.OK {
		t.Errorf("after the fixes: exit %d\n%s", code, out)
	}

	// The built stemctl: the real doctor as the account (it has no
	// images: not ready), root's checks root's.
	bin := readableBin(t)
	os.RemoveAll(s.Runtime)
	stdout, stderr, code := stemctl(t, bin, append([]string{"lab", "doctor", "--json"}, args...)...)
	checks = doctorReport(t, stdout)
	if code != 1 || checks["runtime-dir"].Status != doctor.Fail || checks["runtime-dir"].By != lab.ByRoot ||
		checks["subordinate-ids"].Status != doctor.OK || checks["subordinate-ids"].By != lab.ByRoot {
		t.Errorf("stemctl lab doctor: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, c := range checks {
		if c.By == lab.ByAccount && c.Name == "podman" {
			return
		}
	}
	t.Errorf("no check answered by the account's doctor:\n%s", stdout)
}
