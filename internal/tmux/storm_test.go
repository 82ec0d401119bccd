package tmux_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/imsg"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// stormChild is set in the environment of the test binary re-run as a
// storm client: it dials SOCKET, captures PANE until it is killed, and
// says on stdout where it is ("D" dialing, "A" attached, "C" per capture).
const stormChild = "STEM_TMUX_STORM_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(stormChild); v != "" {
		os.Exit(runStormChild(v))
	}
	os.Exit(m.Run())
}

func runStormChild(v string) int {
	sock, pane, _ := strings.Cut(v, ",")
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) { out.WriteString(s + "\n"); out.Flush() }
	say("D")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tmux.Dial(ctx, tmux.Options{Socket: sock, Session: "stem"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	say("A")
	for {
		if _, err := c.Capture(context.Background(), tmux.PaneID(pane), tmux.CaptureOptions{Scrollback: true}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		say("C")
	}
}

// stormServer is a tmux server with a pane that prints without pause, so
// the server always holds output for its control clients.
type stormServer struct {
	srv  *tmuxtest.Server
	pid  int
	busy string
}

func newStormServer(t testing.TB) *stormServer {
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	pid, err := strconv.Atoi(strings.TrimSpace(srv.Tmux(t, "display-message", "-p", "#{pid}")))
	if err != nil {
		t.Fatal(err)
	}
	busy := strings.TrimSpace(srv.Tmux(t, "new-window", "-d", "-P", "-F", "#{pane_id}",
		"while :; do seq 1 300; done"))
	return &stormServer{srv: srv, pid: pid, busy: busy}
}

// waitStalled returns once the server holds output for a stopped client:
// tmux then stops reading the busy pane, whose last line stops changing.
// A server that keeps reading (another tmux) is given 200 looks.
func waitStalled(t testing.TB, s *stormServer) {
	t.Helper()
	last, same := "", 0
	for i := 0; i < 200 && same < 3; i++ {
		out, err := exec.Command("tmux", "-S", s.srv.Socket, "capture-pane", "-p", "-t", s.busy, "-S", "-1", "-E", "-1").Output()
		if err != nil {
			return // the server is gone: the caller counts it
		}
		if line := strings.TrimSpace(string(out)); line == last {
			same++
		} else {
			last, same = line, 0
		}
	}
}

// alive: the server process exists and is not a zombie.
func (s *stormServer) alive() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// stormResult counts one storm.
type stormResult struct {
	kills, deaths int
	// dropped are clients that ended by themselves, their connection
	// closed by a server that lives on: no session ended, nothing killed.
	dropped int
	at      map[string]int // kills by the point the client had reached
}

// storm starts n clients one after another and SIGKILLs each at a random
// point of its life: while it dials, just after it attached, or after a
// random number of captures. stalled is the share (in percent) of the
// clients that had attached which are stopped first, so that the server
// holds output for them when they die; at 100 every client is killed
// after a capture. A server that dies is counted and replaced.
func storm(t testing.TB, n int, seed uint64, stalled int) stormResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := newStormServer(t)
	res := stormResult{at: map[string]int{}}
	before := "none" // where the last client was killed
	for i := 0; i < n; i++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), stormChild+"="+s.srv.Socket+","+s.busy)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// 0: at "D" (dialing); 1: at "A"; k > 1: after k-1 captures.
		target := rng.IntN(10)
		if stalled == 100 {
			target = 2 + rng.IntN(8)
		}
		br := bufio.NewReader(stdout)
		seen, where := 0, "start"
		for seen <= target {
			line, err := br.ReadString('\n')
			if err != nil {
				break // the child ended by itself: reported below
			}
			seen++
			where = strings.TrimSpace(line)
		}
		if where == "C" {
			where = "capturing"
		}
		if where != "start" && rng.IntN(100) < stalled {
			// A client that stopped reading: the server's writes to it
			// fill the pipe and the rest waits in the server.
			cmd.Process.Signal(syscall.SIGSTOP)
			waitStalled(t, s)
			where += "+stalled"
		}
		cmd.Process.Signal(syscall.SIGKILL)
		werr := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		killed := ok && ws.Signaled()
		if killed {
			res.kills++
			res.at[where]++
		}
		switch {
		case !s.alive():
			res.deaths++
			t.Logf("kill %d (at %s, killed %v; the kill before at %s): the tmux server died", i, where, killed, before)
			s = newStormServer(t)
		case !killed:
			res.dropped++
			where = "ended by itself"
			t.Logf("kill %d: the client ended before it was killed, the server lives on (%v): %s", i, werr, strings.TrimSpace(stderr.String()))
		}
		before = where
	}
	// The last client's end is processed by the time the server answers.
	s.srv.Tmux(t, "list-clients")
	if !s.alive() {
		res.deaths++
	}
	// A storm whose clients mostly end by themselves kills nothing: the
	// count of deaths would mean nothing.
	if res.dropped*100 > res.kills {
		t.Fatalf("%d of %d clients ended before they were killed", res.dropped, res.kills)
	}
	return res
}

// TestSIGKILLStormKeepsServerAlive: stem's control clients killed with
// SIGKILL at random points, while a pane prints without pause, never end
// the student's tmux server. 500 kills here; BenchmarkSIGKILLStorm runs
// 10,000 and reports the counts.
func TestSIGKILLStormKeepsServerAlive(t *testing.T) {
	res := storm(t, stormKills(500), uint64(time.Now().UnixNano()), 25)
	t.Logf("%d SIGKILLs (%v), %d server deaths", res.kills, res.at, res.deaths)
	if res.deaths > 0 {
		t.Fatalf("%d of %d SIGKILLed clients ended the tmux server", res.deaths, res.kills)
	}

	// Control: the count sees a real crash. A client that sends the
	// control flag alone and leaves kills tmux 3.3a (see
	// TestIdentifyCutShortKeepsServerAlive).
	s := newStormServer(t)
	if v := strings.TrimSpace(s.srv.Tmux(t, "display-message", "-p", "#{version}")); v != "3.3a" {
		t.Skipf("control needs tmux 3.3a's crash, this is %s", v)
	}
	raw, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.srv.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	flags := uint32(imsg.ClientControl | imsg.ClientNoStartServer | imsg.ClientUTF8)
	if err := imsg.NewConn(raw).Send(imsg.MsgIdentifyFlags, nil, binary.NativeEndian.AppendUint32(nil, flags)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for i := 0; i < 500 && s.alive(); i++ {
		exec.Command("tmux", "-S", s.srv.Socket, "list-sessions").Run() // a round trip: the server has read the socket
	}
	if s.alive() {
		t.Fatal("control: tmux 3.3a survived a half identification: the storm's death count is not shown to see a crash")
	}
}

// stormKills is n, or STEM_STORM_KILLS when it is set.
func stormKills(n int) int {
	if v, err := strconv.Atoi(os.Getenv("STEM_STORM_KILLS")); err == nil && v > 0 {
		return v
	}
	return n
}

// BenchmarkSIGKILLStorm counts server deaths in two storms: mixed, a
// quarter of the attached clients stopped before the kill; stalled, every
// client stopped after a capture, the state that ended tmux 3.3a's
// server when the pipes ended before the connection (holder.go).
func BenchmarkSIGKILLStorm(b *testing.B) {
	n := stormKills(10000)
	for _, mode := range []struct {
		name    string
		stalled int
	}{{"mixed", 25}, {"stalled", 100}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				res := storm(b, n, uint64(time.Now().UnixNano()), mode.stalled)
				b.ReportMetric(float64(res.kills), "sigkills")
				b.ReportMetric(float64(res.deaths), "server-deaths")
				b.ReportMetric(float64(res.dropped), "dropped")
				b.Logf("%d SIGKILLs (%v), %d server deaths, %d clients the server closed first", res.kills, res.at, res.deaths, res.dropped)
			}
		})
	}
}
