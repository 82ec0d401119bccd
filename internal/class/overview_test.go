package class_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/standin"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// standinClass starts the stand-in gates and returns n students of it and
// the options that reach them with OpenSSH's ssh.
func standinClass(tb testing.TB, n int) (*standin.Server, []class.Student, class.Options) {
	tb.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		tb.Skip("needs OpenSSH's ssh")
	}
	dir := tb.TempDir()
	kp, err := teacherkey.Keygen(filepath.Join(dir, "key"), "kowalski")
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := standin.Start(kp.PublicLine, dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	known := filepath.Join(dir, "known_hosts")
	if err := writeFile(known, srv.KnownHosts+"\n"); err != nil {
		tb.Fatal(err)
	}
	students := make([]class.Student, n)
	for i := range students {
		students[i] = class.Student{Name: fmt.Sprintf("s%03d", i), Host: fmt.Sprintf("u%03d@127.0.0.1", i), Port: srv.Port}
	}
	opt := class.Options{Timeout: 30 * time.Second, Resolve: func(ctx context.Context, s class.Student) (teacherkey.Target, []string, error) {
		return teacherkey.Target{Host: s.Host, Port: s.Port, Key: kp.PrivatePath, SSHOptions: []string{
			"UserKnownHostsFile=" + known, "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes", "LogLevel=ERROR"}}, nil, nil
	}}
	return srv, students, opt
}

// waitConnected waits until the hub has a session with every student.
func waitConnected(tb testing.TB, hub *class.Hub, n int) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		up := 0
		for _, l := range hub.Links() {
			if l.Connected {
				up++
			}
		}
		if up == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d sessions open: %+v", up, n, hub.Links())
		}
	}
}

// Overview asks over the open sessions once they are open (no new SSH
// connection, no status verb), and with new connections before.
func TestOverviewOverOpenSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ssh against a loopback server")
	}
	srv, students, opt := standinClass(t, 4)
	hub := class.NewHub(students, class.HubOptions{Options: opt})
	// The control: with no session open, every row is a new connection.
	for _, r := range hub.Overview(context.Background()) {
		if r.Reach != class.ReachOK || r.Via != "ssh" {
			t.Fatalf("before the sessions: %+v", r)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitConnected(t, hub, len(students))
	verbs, calls := standin.Count(&srv.Verbs, "status"), standin.Count(&srv.Calls, "gate_status")
	rows := hub.Overview(context.Background())
	for _, r := range rows {
		if r.Reach != class.ReachOK || r.Via != "session" || r.Level != "observe" || len(r.Instances) != 1 || r.Instances[0].State != "answers" {
			t.Fatalf("over the sessions: %+v", r)
		}
	}
	if v, c := standin.Count(&srv.Verbs, "status")-verbs, standin.Count(&srv.Calls, "gate_status")-calls; v != 0 || c != int64(len(students)) {
		t.Fatalf("overview made %d status connections and %d gate_status calls; want 0 and %d", v, c, len(students))
	}
}

// A student's events reach the overview: their last build and event, and
// the flags failing (three failed builds and tests) and crashed, which put
// them first.
func TestOverviewHasTheStudentsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ssh against a loopback server")
	}
	_, students, opt := standinClass(t, 2)
	students[1].Host = "failing@" + strings.SplitN(students[1].Host, "@", 2)[1]
	hub := class.NewHub(students, class.HubOptions{Options: opt})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitConnected(t, hub, len(students))
	var seen []class.Event // the four events, as they arrive
	for len(seen) < 4 {
		var last int64
		if len(seen) > 0 {
			last = seen[len(seen)-1].Seq
		}
		evs := hub.Since(ctx, last, time.Minute)
		if len(evs) == 0 {
			t.Fatalf("events after %+v: none within a minute", seen)
		}
		seen = append(seen, evs...)
	}
	rows := hub.Overview(context.Background())
	calm, failing := rows[0], rows[1]
	if calm.Work != nil || len(calm.Flags) != 0 {
		t.Errorf("a student without events: %+v", calm)
	}
	w := failing.Work
	if w == nil || w.FailedRecently != 3 || !w.CrashedRecently || w.LastBuild == nil || w.LastBuild.Type != "test_failed" ||
		w.LastEvent == nil || w.LastEvent.Type != "program_crashed" || w.LastEvent.Signal != "SIGSEGV" {
		t.Fatalf("work of the failing student: %+v", w)
	}
	if !slices.Contains(failing.Flags, class.FlagCrashed) || !slices.Contains(failing.Flags, class.FlagFailing) {
		t.Fatalf("flags %v", failing.Flags)
	}
	class.SortByNeed(rows)
	if rows[0].Student != failing.Student {
		t.Fatalf("the failing student is not first: %s", rows[0].Student)
	}
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }

// Call forwards a tool the student's session has, marked with the
// student's name, and refuses one it lacks, naming the grant's level.
func TestCallByTheSessionsTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ssh against a loopback server")
	}
	srv, students, opt := standinClass(t, 2)
	hub := class.NewHub(students, class.HubOptions{Options: opt})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitConnected(t, hub, len(students))

	before := standin.Count(&srv.Calls, "session_events")
	res, err := hub.Call(context.Background(), "s001", "session_events", map[string]any{"since": 0, "wait_ms": 0})
	if err != nil || res.IsError {
		t.Fatalf("session_events: %v %+v", err, res)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &obj); err != nil || obj["student"] != "s001" ||
		!strings.Contains(obj["notice"].(string), "student s001's session") || obj["events"] == nil {
		t.Fatalf("forwarded result: %v %+v", err, obj)
	}
	if standin.Count(&srv.Calls, "session_events") == before {
		t.Fatal("the call did not reach the student's gate")
	}
	for student, want := range map[string]string{"s001": "at level observe, which does not include pane_send_keys", "nobody": `no student "nobody"`} {
		_, err = hub.Call(context.Background(), student, "pane_send_keys", map[string]any{"pane": "%0", "keys": "x"})
		var re *class.RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, want) {
			t.Fatalf("pane_send_keys to %s: %v, want %q", student, err, want)
		}
	}
}
