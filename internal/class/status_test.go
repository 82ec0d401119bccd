package class

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// fakeSSH, set in the environment, makes the test binary stand in for ssh:
// it behaves as the host part of its destination says. The real ssh and
// sshd are in internal/cmd/class's end-to-end test.
const fakeSSH = "STEM_CLASS_FAKE_SSH"

func TestMain(m *testing.M) {
	if os.Getenv(fakeSSH) != "" {
		os.Exit(fakeMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeMain(args []string) int {
	i := 0
	for i < len(args) && !strings.Contains(args[i], "@") {
		i++
	}
	_, host, _ := strings.Cut(args[min(i, len(args)-1)], "@")
	if i+1 < len(args) && args[i+1] == "mcp" {
		return fakeGate(host)
	}
	switch host {
	case "ok", "down", "flood", "drop":
		st := gatestatus.Status{Account: "anna\x1b]0;pwned\x07", Grant: "kowalski", Level: "observe", Instances: []gatestatus.InstanceStatus{
			{Instance: "native-amd64-demo-hello-t1", Registered: true, Profile: "native-amd64", Task: "1", Tmux: true, Nvim: host != "down"},
			{Instance: "hazard3-sim-inf-bss-t4"},
		}}
		json.NewEncoder(os.Stdout).Encode(st)
	case "garbage":
		fmt.Println("Welcome to lab-03! Last login: yesterday")
	case "endless":
		holdPipes()
		line := strings.Repeat("y", 4095) + "\n"
		for {
			os.Stdout.WriteString(line)
		}
	case "hang":
		holdPipes()
		hang()
	case "child":
		hang()
	case "revoked":
		fmt.Fprintln(os.Stderr, "stem-mcp gate: [revoked] refused: grant g0123 does not exist (revoked?); ask the student to grant this key again")
		return 1
	case "nokey":
		fmt.Fprintln(os.Stderr, "anna@nokey: Permission denied (publickey).")
		return 255
	case "unknownhost":
		fmt.Fprintln(os.Stderr, "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\nHost key verification failed.")
		return 255
	case "refused":
		fmt.Fprintln(os.Stderr, "stem-dial: connect to 127.0.0.1:9: connection refused\nConnection closed by UNKNOWN port 65535")
		return 255
	}
	return 0
}

// hang never returns. Not select{}: without the race detector's threads
// Go's runtime calls that a deadlock and exits.
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// holdPipes starts a child that keeps stdout and stderr open as long as
// it lives (as a ProxyCommand would): the whole process group must go.
func holdPipes() {
	c := exec.Command(os.Args[0], "x", "y@child", "status")
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	c.Start()
}

// liveChildren lists the pids of holdPipes's children that still run (a
// zombie has let go of everything).
func liveChildren(t *testing.T) []string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), "y@child") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 && len(stat) > i+2 && stat[i+2] != 'Z' {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func fakeOptions(t *testing.T, timeout time.Duration) Options {
	t.Setenv(fakeSSH, "1")
	return Options{
		SSH:     os.Args[0],
		Timeout: timeout,
		Resolve: func(ctx context.Context, s Student) (teacherkey.Target, []string, error) {
			if s.Name == "nokeyfile" {
				return teacherkey.Target{}, nil, fmt.Errorf("automation key /nope: no such file")
			}
			return teacherkey.Target{Host: s.Host, Key: "/k"}, nil, nil
		},
	}
}

// Each failure is told apart, bounded, and named; the gate's strings are
// cleaned; an endless student does not hold the others. (The hanging one
// is TestStatusHangIsBounded: it waits the whole timeout.)
func TestStatusClassifiesAndBounds(t *testing.T) {
	hosts := []string{"ok", "down", "garbage", "endless", "revoked", "nokey", "unknownhost", "refused", "nokeyfile"}
	var ss []Student
	for _, h := range hosts {
		ss = append(ss, Student{Name: h, Host: "anna@" + h})
	}
	const timeout = 10 * time.Second
	start := time.Now()
	rows := Status(context.Background(), ss, fakeOptions(t, timeout))
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Fatalf("Status took %v with a per-student timeout of %v", took, timeout)
	}
	want := map[string]struct {
		reach Reach
		flag  Flag
		why   string
	}{
		"ok":          {ReachOK, FlagNotStarted, ""},
		"down":        {ReachOK, FlagInstanceDown, ""},
		"garbage":     {ReachBroken, FlagBroken, "not the gate's status"},
		"endless":     {ReachBroken, FlagBroken, "past 262144 bytes"},
		"revoked":     {ReachRevoked, FlagNoAccess, "does not exist (revoked?)"},
		"nokey":       {ReachKeyRefused, FlagNoAccess, "does not accept the automation key"},
		"unknownhost": {ReachHostKeyUnknown, FlagUnreachable, "not in your known_hosts"},
		"refused":     {ReachRefused, FlagUnreachable, "nothing accepts connections on refused port 22"},
		"nokeyfile":   {ReachSetup, FlagSetup, "no such file"},
	}
	for i, r := range rows {
		if r.Student != hosts[i] {
			t.Fatalf("row %d is %s, want %s", i, r.Student, hosts[i])
		}
		w := want[r.Student]
		if r.Reach != w.reach || len(r.Flags) == 0 || r.Flags[0] != w.flag || !strings.Contains(r.Why, w.why) {
			t.Errorf("%s: reach %s flags %v why %q; want %s %s %q", r.Student, r.Reach, r.Flags, r.Why, w.reach, w.flag, w.why)
		}
		if r.Reach != ReachOK && r.Fix == "" {
			t.Errorf("%s: no fix given", r.Student)
		}
		if time.Duration(r.Millis)*time.Millisecond >= timeout {
			t.Errorf("%s took %d ms: held up by another student?", r.Student, r.Millis)
		}
	}
	// ssh's whole process group went with it: no child is left running.
	for deadline := time.Now().Add(5 * time.Second); ; {
		left := liveChildren(t)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind by the stand-in ssh: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ok := rows[0]
	if ok.ClaimedAccount != "anna" || ok.Level != "observe" || len(ok.Instances) != 2 || ok.Instances[0].State != "answers" || ok.Instances[1].State != "not started" {
		t.Fatalf("ok row: %+v", ok)
	}
	if rows[1].Instances[0].State != "no nvim" {
		t.Fatalf("down row: %+v", rows[1].Instances)
	}
	if !strings.Contains(rows[6].Fix, "ssh-keyscan -p 22 unknownhost") {
		t.Fatalf("unknown host key fix: %s", rows[7].Fix)
	}
	SortByNeed(rows)
	if rows[0].Student != "down" || rows[len(rows)-1].Student != "ok" {
		var order []string
		for _, r := range rows {
			order = append(order, r.Student)
		}
		t.Fatalf("by need: %v", order)
	}
}

// A student whose gate never answers is cut off at the timeout and named
// so, while the others' rows come in on their own time.
func TestStatusHangIsBounded(t *testing.T) {
	ss := []Student{{Name: "ok", Host: "anna@ok"}, {Name: "hang", Host: "anna@hang"}, {Name: "endless", Host: "anna@endless"}}
	const timeout = 3 * time.Second
	start := time.Now()
	rows := Status(context.Background(), ss, fakeOptions(t, timeout))
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Fatalf("Status took %v with a per-student timeout of %v", took, timeout)
	}
	if r := rows[1]; r.Reach != ReachTimeout || len(r.Flags) == 0 || r.Flags[0] != FlagUnreachable || !strings.Contains(r.Why, "no answer within 3s") || r.Fix == "" {
		t.Errorf("hang: reach %s flags %v why %q fix %q", r.Reach, r.Flags, r.Why, r.Fix)
	}
	for _, r := range []Row{rows[0], rows[2]} {
		if r.Reach == ReachTimeout || time.Duration(r.Millis)*time.Millisecond >= timeout {
			t.Errorf("%s: %s after %d ms: held up by the hanging student?", r.Student, r.Reach, r.Millis)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(liveChildren(t)) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind by the hanging stand-in ssh: %v", liveChildren(t))
		}
	}
}

func TestCappedWriter(t *testing.T) {
	stopped := false
	c := &capped{max: 10, full: func() { stopped = true }}
	if n, err := c.Write([]byte("12345")); n != 5 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := c.Write([]byte("67890abc")); err == nil || !stopped || !c.over || c.String() != "1234567890" {
		t.Fatalf("%v %v %v %q", err, stopped, c.over, c.String())
	}
	quiet := &capped{max: 3}
	if n, err := quiet.Write([]byte("abcdef")); n != 6 || err != nil || quiet.String() != "abc" {
		t.Fatal(n, err, quiet.String())
	}
}
