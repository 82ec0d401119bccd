package soak_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/standin"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
)

const (
	inst     = "native-amd64-demo-hello-t1"
	clients  = 30 // MCP clients on the one instance
	students = 30 // sessions of the class server
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// envDuration reads a duration from the environment.
func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: not a positive duration", name, v)
	}
	return d
}

// The soak's processes, by what the table calls them.
var watched = []struct{ key, what string }{
	{"serve", "30 stem-mcp serve"},
	{"agent-mcp", "the agent's stem-mcp"},
	{"supervisor", "the agent's supervisor"},
	{"class", "stem-mcp class"},
}

// BenchmarkSoak runs, for STEM_SOAK_DURATION (default 1m; make bench sets
// 30m) after a warm-up (until the heap of each stem-mcp it starts has
// grown to its collection goal once, a few minutes): 30 MCP clients, each its own `stem-mcp serve` on
// one instance, calling a tool every STEM_SOAK_EVERY (default 500ms); an
// agent (the test provider, in its sandbox) calling at the same pace
// through its relay; and `stem-mcp class` over 30 stand-in students'
// sessions answering class_overview every 4 periods. Every caller is held
// between calls while the memory and descriptors of each process are read
// at the start and at the end. Any failed call, or a descriptor more at
// the end, fails it; so does memory grown by half and 16 MiB.
func BenchmarkSoak(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real containers for minutes (skipped with -short)")
	}
	dur := envDuration(b, "STEM_SOAK_DURATION", time.Minute)
	every := envDuration(b, "STEM_SOAK_EVERY", 500*time.Millisecond)
	testenv.RequireAccount(b)
	testenv.Require(b, "ssh")
	bin := testenv.Binary(b, "stemctl", "./cmd/stemctl")
	testenv.Binary(b, "stem-mcp", "./cmd/stem-mcp")
	testenv.Binary(b, "stem-dial", "./cmd/stem-dial")
	testenv.Binary(b, "mcpclient", "./internal/agent/testdata/mcpclient")
	a := testenv.NewAccount(b, bin, testenv.AccountOptions{})
	must := func(args ...string) string {
		b.Helper()
		r, err := a.Run(nil, args...)
		if err != nil || r.Code != 0 {
			b.Fatalf("stemctl %s: exit %d %v\n%s%s", strings.Join(args, " "), r.Code, err, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	writeProvider(b, a, every)
	must("up", "native-amd64", "demo", "hello", "1")
	stemMCP := filepath.Join(bin, "stem-mcp")

	l := newLoops()
	defer l.stop()
	var servePIDs []int
	var traced []*mcpProc
	for i := range clients {
		p := startMCP(b, stemMCP, a.Env, "serve", "--level", "observe", "--instance", inst)
		servePIDs = append(servePIDs, p.pid())
		traced = append(traced, p)
		pane, err := firstPane(p)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		l.every(time.Duration(i)*every/clients, every, fmt.Sprintf("client %d", i), func() error {
			n++
			var err error
			switch n % 4 {
			case 0:
				_, err = p.call("session_status", nil)
			case 1:
				_, err = p.call("pane_list", nil)
			case 2:
				_, err = p.call("pane_capture", map[string]any{"pane": pane})
			case 3:
				_, err = p.call("nvim_status", nil)
			}
			return err
		})
	}

	var rec agentstore.Record
	if err := json.Unmarshal([]byte(must("agent", "start", "soak", "native-amd64", "demo", "hello", "1", "--background", "--json")), &rec); err != nil {
		b.Fatal(err)
	}
	ag := &agentSoak{a: a, rec: rec}
	ag.waitCalls(b, 1)
	agentMCP := childrenNamed(rec.PID, "stem-mcp")
	if len(agentMCP) != 1 {
		b.Fatalf("the supervisor %d has %d stem-mcp children, want the agent's one", rec.PID, len(agentMCP))
	}

	cls := startClass(b, a, stemMCP)
	l.every(0, 4*every, "class_overview", func() error { return overviewAll(cls) })

	pids := map[string][]int{"serve": servePIDs, "agent-mcp": agentMCP, "supervisor": {rec.PID}, "class": {cls.pid()}}
	snap := func() map[string]usage {
		l.hold()
		defer l.release()
		ag.pause(b, true)
		defer ag.pause(b, false)
		out := map[string]usage{}
		for k, ps := range pids {
			u, err := sampleAll(ps)
			if err != nil {
				b.Fatalf("%s: %v", k, err)
			}
			out[k] = u
		}
		return out
	}
	// Warm-up: every caller has called, and the heap of each stem-mcp
	// started here has grown to its collection goal once (4x its live
	// size with stem-mcp's GC setting, minutes at this pace): before
	// that, memory grows as it fills, which is no leak.
	// (The sleeps are the soak's own length, not waits for a state.)
	w0 := time.Now()
	time.Sleep(min(dur/10, time.Minute))
	warmUp(b, append(traced, cls), 20*time.Minute)
	warm := time.Since(w0)
	start, calls0, agent0 := snap(), l.calls.Load(), ag.counts(b).Calls
	b.ResetTimer()
	time.Sleep(dur)
	b.StopTimer()
	end := snap()
	calls := l.calls.Load() - calls0 + ag.counts(b).Calls - agent0
	l.stop()
	ac := ag.counts(b)

	b.ReportMetric(dur.Minutes(), "minutes")
	b.ReportMetric(warm.Minutes(), "warmup-minutes")
	b.ReportMetric(float64(calls), "calls")
	b.ReportMetric(float64(l.errs.Load()+ac.Errors), "errors")
	var grew []string
	for _, w := range watched {
		s, e := start[w.key], end[w.key]
		b.ReportMetric(float64(s.rssKiB)/1024, w.key+"-rss-start-MiB")
		b.ReportMetric(float64(e.rssKiB)/1024, w.key+"-rss-end-MiB")
		b.ReportMetric(float64(e.rssKiB-s.rssKiB)/1024, w.key+"-rss-growth-MiB")
		b.ReportMetric(float64(s.fds), w.key+"-fds-start")
		b.ReportMetric(float64(e.fds), w.key+"-fds-end")
		b.ReportMetric(float64(e.fds-s.fds), w.key+"-fds-growth")
		// The figures are printed when the soak fails too (metrics are not).
		b.Logf("%s: %d → %d KiB, %d → %d descriptors", w.what, s.rssKiB, e.rssKiB, s.fds, e.fds)
		if e.fds > s.fds || e.rssKiB > s.rssKiB*3/2+16*1024 {
			grew = append(grew, fmt.Sprintf("%s: %d → %d KiB, %d → %d descriptors", w.what, s.rssKiB, e.rssKiB, s.fds, e.fds))
		}
	}
	if n := l.errs.Load(); n > 0 {
		b.Errorf("%d failed calls of %d, the first: %s", n, l.calls.Load(), strings.Join(l.errors(), "\n"))
	}
	if ac.Errors > 0 {
		b.Errorf("the agent: %d failed calls of %d, the last: %s", ac.Errors, ac.Calls, ac.LastError)
	}
	if len(grew) > 0 {
		b.Errorf("grew over %s:\n%s", dur, strings.Join(grew, "\n"))
	}
}

// warmUp waits until every process in ps has run a collection its heap's
// growth set off, for at most limit (then the soak goes on, and says so).
func warmUp(b *testing.B, ps []*mcpProc, limit time.Duration) {
	t0 := time.Now()
	for {
		cold := 0
		for _, p := range ps {
			if p.full.Load() == 0 {
				cold++
			}
		}
		if cold == 0 {
			b.Logf("warm-up: %s", time.Since(t0).Round(time.Second))
			return
		}
		if time.Since(t0) > limit {
			b.Logf("warm-up: %d of %d stem-mcp did not collect within %s; starting anyway", cold, len(ps), limit)
			return
		}
		time.Sleep(time.Second)
	}
}

// writeProvider names the soak provider: the test provider calling tools
// at the pace every, its counts in its sandbox home.
func writeProvider(b *testing.B, a *testenv.Account, every time.Duration) {
	client := filepath.Join(a.Bin, "mcpclient")
	cfg := fmt.Sprintf(`# the test provider calling tools for as long as it runs
[providers.soak]
command = [%q, "--report", "{home}/report.json", "--soak-every", %q, "--soak-report", "{home}/soak.json"]
`, client, every.String())
	if err := os.WriteFile(filepath.Join(a.Base, "config", agentcli.ConfigFile), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
}

// startClass writes a class of stand-in students and starts `stem-mcp
// class` on it, with every session open.
func startClass(b *testing.B, a *testenv.Account, stemMCP string) *mcpProc {
	home := filepath.Join(a.Base, "home")
	kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(home, "kowalski"), "kowalski")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := standin.Start(kp.PublicLine, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	known, roster := filepath.Join(a.Base, "lab.known_hosts"), filepath.Join(a.Base, "lab.csv")
	var csv strings.Builder
	for i := range students {
		fmt.Fprintf(&csv, "s%03d,u%03d@127.0.0.1,%d\n", i, i, srv.Port)
	}
	for p, data := range map[string]string{known: srv.KnownHosts + "\n", roster: csv.String()} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"class", "init", "lab", "--key", kp.PrivatePath, "--ssh-option", "UserKnownHostsFile=" + known, "--ssh-option", "GlobalKnownHostsFile=/dev/null",
			"--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR"},
		{"class", "import", "lab", roster},
	} {
		if r, err := a.Run(nil, args...); err != nil || r.Code != 0 {
			b.Fatalf("stemctl %v: %d %v\n%s", args, r.Code, err, r.Stderr)
		}
	}
	p := startMCP(b, stemMCP, a.Env, "class", "--class", "lab", "--timeout", "2m")
	for deadline := time.Now().Add(5 * time.Minute); ; {
		ov, err := overview(p)
		if err != nil {
			b.Fatal(err)
		}
		up := 0
		for _, s := range ov.Sessions {
			if s.Connected {
				up++
			}
		}
		if up == students {
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d class sessions open", up, students)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type classOverview struct {
	Students []class.Row  `json:"students"`
	Sessions []class.Link `json:"sessions"`
}

func overview(p *mcpProc) (classOverview, error) {
	var ov classOverview
	text, err := p.call("class_overview", nil)
	if err != nil {
		return ov, err
	}
	return ov, json.Unmarshal([]byte(text), &ov)
}

// overviewAll is a class_overview in which every student answered over
// its open session.
func overviewAll(p *mcpProc) error {
	ov, err := overview(p)
	if err != nil {
		return err
	}
	if len(ov.Students) != students {
		return fmt.Errorf("class_overview: %d students, want %d", len(ov.Students), students)
	}
	for _, r := range ov.Students {
		if r.Reach != class.ReachOK || r.Via != "session" {
			return fmt.Errorf("class_overview: %s %s via %q: %s", r.Student, r.Reach, r.Via, r.Why)
		}
	}
	return nil
}
