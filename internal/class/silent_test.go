package class_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/standin"
	"github.com/stem-edu/stem/internal/tcprelay/tcprelaytest"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// relayedClass is two stand-in students reached with OpenSSH's ssh: s000
// directly, s001 through a relay that can go silent.
func relayedClass(tb testing.TB) (*standin.Server, *tcprelaytest.Relay, []class.Student, class.Options) {
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
	relay := tcprelaytest.Start(tb, "127.0.0.1:"+strconv.Itoa(srv.Port))
	// The relay's port presents the stand-in's host key.
	known := filepath.Join(dir, "known_hosts")
	via := strings.Replace(srv.KnownHosts, fmt.Sprintf("]:%d ", srv.Port), fmt.Sprintf("]:%d ", relay.Port), 1)
	if err := writeFile(known, srv.KnownHosts+"\n"+via+"\n"); err != nil {
		tb.Fatal(err)
	}
	students := []class.Student{{Name: "s000", Host: "u000@127.0.0.1", Port: srv.Port}, {Name: "s001", Host: "u001@127.0.0.1", Port: relay.Port}}
	opt := class.Options{Timeout: 15 * time.Second, Resolve: func(ctx context.Context, s class.Student) (teacherkey.Target, []string, error) {
		return teacherkey.Target{Host: s.Host, Port: s.Port, Key: kp.PrivatePath, SSHOptions: []string{
			"UserKnownHostsFile=" + known, "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes", "LogLevel=ERROR"}}, nil, nil
	}}
	return srv, relay, students, opt
}

func linkOf(hub *class.Hub, student string) class.Link {
	for _, l := range hub.Links() {
		if l.Student == student {
			return l
		}
	}
	return class.Link{}
}

// waitLink waits until the student's link satisfies ok.
func waitLink(tb testing.TB, hub *class.Hub, student, what string, within time.Duration, ok func(class.Link) bool) class.Link {
	tb.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if l := linkOf(hub, student); ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v: %+v", what, within, linkOf(hub, student))
		}
	}
}

func startHub(tb testing.TB, students []class.Student, opt class.HubOptions) *class.Hub {
	tb.Helper()
	hub := class.NewHub(students, opt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	waitConnected(tb, hub, len(students))
	return hub
}

// heartbeat is HubOptions.Silent for the tests: the default, or with
// STEM_CONTROL_NO_HEARTBEAT set, none (the control: a silent student is
// then not gone within goneWithin).
func heartbeat(d time.Duration) time.Duration {
	if os.Getenv("STEM_CONTROL_NO_HEARTBEAT") != "" {
		return -1
	}
	return d
}

// goneWithin is how long the tests wait for a silent student to be gone:
// well past the heartbeat's 5 s, well short of what a silent peer takes
// without it (the poll's 20 s wait plus the call's timeout).
const goneWithin = 20 * time.Second

// A student whose packets stop (the relay holds them, closing nothing) is
// gone within seconds with a reason that says they stopped answering; the
// other student's session carries on and answers; when the relay passes
// bytes again the student is back.
func TestSilentStudentGone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ssh against a loopback server")
	}
	_, relay, students, opt := relayedClass(t)
	hub := startHub(t, students, class.HubOptions{Options: opt, Silent: heartbeat(0)})
	before := linkOf(hub, "s000")
	relay.Silence()
	l := waitLink(t, hub, "s001", "s001 gone", goneWithin, func(l class.Link) bool { return !l.Connected })
	if !l.Silent || !strings.Contains(l.Error, "stopped answering") {
		t.Fatalf("s001 gone, but not for silence: %+v", l)
	}
	t.Logf("s001: %s", l.Error)
	res, err := hub.Call(context.Background(), "s000", "gate_status", nil)
	if err != nil || res.IsError {
		t.Fatalf("s000 while s001 is silent: %v %+v", err, res)
	}
	if now := linkOf(hub, "s000"); !now.Connected || !now.Since.Equal(*before.Since) {
		t.Fatalf("s000's session did not carry on: %+v, before %+v", now, before)
	}
	relay.Forward()
	waitLink(t, hub, "s001", "s001 back", 2*time.Minute, func(l class.Link) bool { return l.Connected && !l.Silent && l.Error == "" })
}

// A slow student (every chunk held 500 ms each way: a round trip of 1 s
// against a 3 s window) is not taken for gone: the session outlives eight
// answers to pings, each of which came after a quiet second.
func TestSlowStudentNotGone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ssh against a loopback server")
	}
	_, relay, students, opt := relayedClass(t)
	hub := startHub(t, students, class.HubOptions{Options: opt, Silent: 3 * time.Second})
	since := *linkOf(hub, "s001").Since
	relay.Delay(500 * time.Millisecond)
	back := relay.Back()
	for deadline := time.Now().Add(2 * time.Minute); relay.Back()-back < 8; time.Sleep(10 * time.Millisecond) {
		if l := linkOf(hub, "s001"); !l.Connected || !l.Since.Equal(since) {
			t.Fatalf("the slow student was taken for gone: %+v", l)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d answers through the slow link", relay.Back()-back)
		}
	}
	if l := linkOf(hub, "s001"); !l.Connected || !l.Since.Equal(since) {
		t.Fatalf("the slow student was taken for gone: %+v", l)
	}
}

// BenchmarkSilentStudentGone: the relay to one of two stand-in students
// goes silent (holds every byte, closes nothing) to the hub counting them
// gone, with the default heartbeat and without one (off: only the
// session_events call's deadline, its 20 s wait plus the 15 s timeout,
// notices); then the relay forwards again and the hub reconnects before
// the next sample.
func BenchmarkSilentStudentGone(b *testing.B) {
	for _, mode := range []struct {
		name   string
		silent time.Duration
	}{{"heartbeat", 0}, {"off", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			_, relay, students, opt := relayedClass(b)
			// Backoff as short as it goes: the reconnect between samples is quick.
			hub := startHub(b, students, class.HubOptions{Options: opt, Silent: mode.silent, MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
			var took []time.Duration
			for b.Loop() {
				waitLink(b, hub, "s001", "connected", 2*time.Minute, func(l class.Link) bool { return l.Connected })
				t0 := time.Now()
				relay.Silence()
				waitLink(b, hub, "s001", "gone", time.Minute, func(l class.Link) bool { return !l.Connected })
				took = append(took, time.Since(t0))
				relay.Forward()
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(took[len(took)/2].Seconds(), "p50-s")
			b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
		})
	}
}
