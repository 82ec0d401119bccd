package class

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/standin"
	accesscmd "github.com/stem-edu/stem/internal/cmd/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// maxTeacherRSS bounds the memory of a teacher-side program under the
// attacks (its ssh children apart). Calm, stem-mcp class holds a class of
// ten in about 30 MiB; the flood took it past 2 GiB in 40 s.
const maxTeacherRSS = 200 << 10 // KiB

// hostileClass is a class "lab" of honest stand-in students (s000..,
// failing1), two hostile stand-in gates (hostile-events1, hostile-text1),
// mallory, whose forced command on a real sshd is the test binary as a
// hostile gate that floods the teacher's side with requests, and anna, an
// honest student with the real gate in front of a real instance (tmux,
// Neovim, a container) on a real sshd of her own.
func hostileClass(t *testing.T, honest int) (mcpBin string, env []string, anna *testenv.Instance) {
	t.Helper()
	srvd, annad := sshdtest.Start(t), sshdtest.Start(t)
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	home := t.TempDir()
	kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(home, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("restrict,command=\"STEM_HOSTILE_GATE=%s exec %s\" %s\n", standin.HostileFlood, self, kp.PublicLine)
	if err := os.WriteFile(srvd.AuthorizedKeys, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := standin.Start(kp.PublicLine, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	anna = realStudent(t, annad, filepath.Join(bin, "stem-mcp"), kp.PublicPath)
	var kh []byte
	for _, s := range []*sshdtest.Server{srvd, annad} {
		data, err := os.ReadFile(s.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		kh = append(kh, data...)
	}
	known := filepath.Join(home, "lab.known_hosts")
	var csv strings.Builder
	for i := range honest {
		fmt.Fprintf(&csv, "s%03d,u%03d@127.0.0.1,%d\n", i, i, srv.Port)
	}
	for _, n := range []string{"failing1", "hostile-events1", "hostile-text1"} {
		fmt.Fprintf(&csv, "%s,%s@127.0.0.1,%d\n", n, n, srv.Port)
	}
	fmt.Fprintf(&csv, "mallory,%s,%d\n", srvd.Host(), srvd.Port)
	fmt.Fprintf(&csv, "anna,%s,%d\n", annad.Host(), annad.Port)
	roster := filepath.Join(home, "lab.csv")
	for p, data := range map[string]string{known: srv.KnownHosts + "\n" + string(kh), roster: csv.String()} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(home, ".config", "stem")
	ios, _, _, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return map[string]string{"HOME": home}[k] },
		Dirs: func() (xdg.Dirs, error) { return xdg.Dirs{Home: home, Config: cfg}, nil }}
	for _, args := range [][]string{
		{"init", "lab", "--key", kp.PrivatePath, "--ssh-option", "UserKnownHostsFile=" + known, "--ssh-option", "GlobalKnownHostsFile=/dev/null",
			"--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR"},
		{"import", "lab", roster},
	} {
		cmd := NewCmdClass(f)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			t.Fatalf("stemctl class %v: %v\n%s", args, err, errOut)
		}
	}
	return filepath.Join(bin, "stem-mcp"), []string{"HOME=" + home, "STEM_CONFIG_DIR=" + cfg, "PATH=" + os.Getenv("PATH")}, anna
}

// realStudent makes an instance and grants the teacher's key pub at
// observe through `stemctl access grant` on sshd srv: the real gate.
func realStudent(t *testing.T, srv *sshdtest.Server, mcpBin, pub string) *testenv.Instance {
	t.Helper()
	in := testenv.New(t, testenv.Options{})
	// The gate writes to the instance's state until its session ends,
	// which is a moment after the class's ssh client does.
	t.Cleanup(func() {
		if err := srv.WaitSessions(time.Minute); err != nil {
			t.Error(err)
		}
	})
	vars := map[string]string{}
	for _, kv := range in.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	ios, _, _, errOut := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return vars[k] },
		Dirs:      func() (xdg.Dirs, error) { return in.Dirs, nil },
		MCPBinary: func() (string, error) { return mcpBin, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(in.Dirs.State) },
	}
	cmd := accesscmd.NewCmdAccess(f)
	cmd.SetArgs([]string{"grant", "--name", "kowalski", "--key", pub, "--level", "observe", "--authorized-keys", srv.AuthorizedKeys})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("stemctl access grant: %v\n%s", err, errOut)
	}
	return in
}

// peakRSS samples pid's VmRSS until stop is called, which returns the
// largest seen (KiB).
func peakRSS(pid int) (stop func() int) {
	var mu sync.Mutex
	peak := 0
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			v := vmRSS(pid)
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// result calls a tool of stem-mcp class.
func (p *classProc) result(t *testing.T, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// call calls a tool of stem-mcp class and returns its first text.
func (p *classProc) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res := p.result(t, tool, args)
	return res.Content[0].(mcp.TextContent).Text, res.IsError
}

// callAll calls a tool of stem-mcp class and returns all its texts.
func (p *classProc) callAll(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res := p.result(t, tool, args)
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String(), res.IsError
}

// exited waits (a generous while) for the process to end and says whether
// it did.
func (p *classProc) exited() bool {
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Minute):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return false
	}
}

// The class holds against hostile students: mallory floods the teacher's
// side with 1 MiB requests and stops reading, hostile-events1 floods
// events, hostile-text1 answers with escape sequences and instructions.
// stem-mcp class stays small, cuts mallory off and says so, keeps the
// honest students' rows and events, quotes what the hostile side said as
// its data (exact text), and ends on SIGTERM and on the end of its input.
func TestHostileStudents(t *testing.T) {
	mcpBin, env, anna := hostileClass(t, 5)
	for _, end := range []string{"SIGTERM", "EOF"} {
		t.Run(end, func(t *testing.T) {
			p := startClass(t, mcpBin, env, "--timeout", "20s")
			stop := peakRSS(p.cmd.Process.Pid)
			var ov overview
			var took []time.Duration
			deadline := time.Now().Add(3 * time.Minute)
			for ; ; time.Sleep(100 * time.Millisecond) {
				t0 := time.Now()
				ov = p.overview(t, false)
				took = append(took, time.Since(t0))
				ok, cut := 0, false
				for _, r := range ov.Students {
					if (strings.HasPrefix(r.Student, "s0") || r.Student == "anna") && r.Reach == class.ReachOK {
						ok++
					}
				}
				for _, l := range ov.Sessions {
					if l.Student == "mallory" && l.CutOff && strings.Contains(l.Error, "requests to the teacher's side") {
						cut = true
					}
				}
				if ok == 6 && cut {
					break
				}
				if time.Now().After(deadline) || vmRSS(p.cmd.Process.Pid) > 4*maxTeacherRSS {
					t.Logf("RSS %d KiB", vmRSS(p.cmd.Process.Pid))
					stop()
					p.stop()
					t.Fatalf("mallory not cut off, or honest students missing: %+v", ov.Sessions)
				}
			}
			t.Logf("class_overview from the start until mallory was cut off: p50 %.1f ms of %d calls", p50(took), len(took))
			if end == "SIGTERM" {
				checkEvents(t, p)
				checkText(t, p)
				checkRealStudent(t, p, anna)
			}
			peak := stop()
			t.Logf("peak RSS of stem-mcp class under attack: %d KiB", peak)
			if peak > maxTeacherRSS {
				t.Errorf("stem-mcp class grew to %d KiB under the flood (bound %d KiB)", peak, maxTeacherRSS)
			}
			if end == "SIGTERM" {
				p.cmd.Process.Signal(syscall.SIGTERM)
			} else {
				p.in.Close()
			}
			if !p.exited() {
				t.Fatalf("stem-mcp class still ran a minute after %s", end)
			}
		})
	}
}

// checkEvents: failing1's four events are there beside hostile-events1's
// flood, whose own oldest were dropped and counted; no event names another
// student in its gdb map or carries the student's clock; pages are bounded.
func checkEvents(t *testing.T, p *classProc) {
	t.Helper()
	var since int64
	failing, hostile := 0, 0
	var dropped map[string]int64
	for deadline := time.Now().Add(2 * time.Minute); failing < 4 || dropped["hostile-events1"] == 0; {
		text, isErr := p.call(t, "class_events", map[string]any{"since": since})
		if isErr {
			t.Fatalf("class_events: %s", text)
		}
		if len(text) > class.MaxPageBytes+64<<10 {
			t.Fatalf("a class_events page of %d bytes", len(text))
		}
		var pg struct {
			Events  []class.Event    `json:"events"`
			Next    int64            `json:"next"`
			More    bool             `json:"more"`
			Dropped map[string]int64 `json:"dropped"`
		}
		if err := json.Unmarshal([]byte(text), &pg); err != nil {
			t.Fatal(err)
		}
		if len(pg.Events) > class.MaxPageEvents {
			t.Fatalf("%d events on one page", len(pg.Events))
		}
		dropped = pg.Dropped
		for _, e := range pg.Events {
			if _, ok := e.GDB["student"]; ok {
				t.Fatalf("an event's gdb map names a student: %+v", e)
			}
			if e.Time.After(time.Now().Add(time.Minute)) {
				t.Fatalf("an event carries the student's clock: %+v", e)
			}
			switch e.Student {
			case "failing1":
				failing++
			case "hostile-events1":
				hostile++
			}
		}
		since = pg.Next
		if time.Now().After(deadline) {
			t.Fatalf("failing1's events: %d of 4, hostile-events1's: %d, dropped %v", failing, hostile, dropped)
		}
	}
	t.Logf("class_events: failing1 %d events, hostile-events1 %d (dropped %d)", failing, hostile, dropped["hostile-events1"])
}

// checkRealStudent: what anna types in her shell reaches the teacher's
// agent through her real gate while the attack goes on.
func checkRealStudent(t *testing.T, p *classProc, anna *testenv.Instance) {
	t.Helper()
	pane := strings.TrimSpace(anna.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	anna.Tmux(t, "send-keys", "-t", pane, "-l", "echo ANNA-$((6*7))")
	anna.Tmux(t, "send-keys", "-t", pane, "Enter")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		text, isErr := p.callAll(t, "pane_capture", map[string]any{"student": "anna", "pane": pane})
		if !isErr && strings.Contains(text, "\nANNA-42\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("anna's shell through her real gate: %v %s", isErr, text)
		}
	}
}

// checkText: the exact text the agent gets from hostile-text1's error,
// tool names and notice.
func checkText(t *testing.T, p *classProc) {
	t.Helper()
	const who = "hostile-text1"
	text, isErr := p.call(t, "pane_list", map[string]any{"student": who})
	want, _ := json.Marshal(map[string]any{"student": who, "notice": class.ForwardNotice(who),
		"error":        "pane_list failed: the student's side answered with an error; its text is student_said, that student's data",
		"student_said": termtext.Line(standin.HostileError+strings.Repeat("A", 200<<10), 300)})
	if !isErr || text != string(want) {
		t.Fatalf("pane_list's failure:\n got %q\nwant %q", text, want)
	}
	text, isErr = p.call(t, "pane_send_keys", map[string]any{"student": who, "keys": "x"})
	if w := "pane_send_keys refused: student hostile-text1's grant kowalski is at level observe, which does not include pane_send_keys (it has: pane_capture, pane_list, session_events)"; !isErr || text != w {
		t.Fatalf("the refusal:\n got %q\nwant %q", text, w)
	}
	text, _ = p.call(t, "pane_capture", map[string]any{"student": who})
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatal(err)
	}
	if obj["notice"] != class.ForwardNotice(who) || obj["student_notice"] != termtext.Line(standin.HostileNotice, 300) || obj["student"] != who {
		t.Fatalf("pane_capture's notices: %s", text)
	}
}
