package class

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmd/teacher"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
	"github.com/stem-edu/stem/internal/xdg"
)

const (
	image    = "localhost/stem-native-amd64:latest"
	instance = "native-amd64-demo-hello-t1"
)

// labStudent is a real non-root account with its own rootless Podman
// reading the images from a shared store as a lab's accounts do, an
// instance from its own `stemctl up`, and the teacher's key granted in its
// own ~/.ssh/authorized_keys.
type labStudent struct {
	s *student.Student
	a *testenv.Account
}

// newLab makes one student account per level, side by side, each
// granting the teacher's key at its level, and reports what each step
// cost per student.
func newLab(t *testing.T, grantLevels []string, bin, pub string) []labStudent {
	t.Helper()
	n := len(grantLevels)
	lab := make([]labStudent, n)
	var mu sync.Mutex
	var made, up, granted time.Duration
	start := time.Now()
	t0 := time.Now()
	for i, s := range student.NewManyShared(t, n, image) {
		lab[i].s = s
	}
	made = time.Since(t0)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range lab {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &lab[i]
			t1 := time.Now()
			st.a = st.s.Account(t, bin)
			if r, err := st.a.Run(nil, "up", "native-amd64", "demo", "hello", "1"); err != nil || r.Code != 0 {
				errs[i] = fmt.Errorf("up as %s: %v %d\n%s", st.s.Name, err, r.Code, r.Stderr)
				return
			}
			t2 := time.Now()
			keyFile := filepath.Join(st.a.Base, "teacher.pub")
			if err := os.WriteFile(keyFile, []byte(pub+"\n"), 0o644); err != nil {
				errs[i] = err
				return
			}
			if r, err := st.a.Run(nil, "access", "grant", "--name", "kowalski", "--key", keyFile, "--level", grantLevels[i]); err != nil || r.Code != 0 {
				errs[i] = fmt.Errorf("grant as %s: %v %d\n%s", st.s.Name, err, r.Code, r.Stderr)
				return
			}
			mu.Lock()
			up, granted = up+t2.Sub(t1), granted+time.Since(t2)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	per := func(d time.Duration) time.Duration { return (d / time.Duration(n)).Round(time.Millisecond) }
	t.Logf("%d students in %v; per student: account %v, first up %v, grant %v (ups ran side by side)",
		n, time.Since(start).Round(time.Millisecond), per(made), per(up), per(granted))
	return lab
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// A class of real students behind one real sshd, and students that fail
// each in their own way: the table names every one, says why, and the
// ones that fail (one hangs) hold nobody else up.
func TestClassStatusAgainstRealStudents(t *testing.T) {
	t.Parallel() // its own accounts, lab or class directories, daemons
	if testing.Short() {
		t.Skip("makes student accounts with rootless Podman and runs sshd")
	}
	testenv.RequireAccount(t)
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	srv := sshdtest.Start(t, "Match User "+student.Prefix+"*", "\tAuthorizedKeysFile .ssh/authorized_keys")
	// Stand-ins for student machines gone wrong, each its own sshd (one
	// account is one student): one whose gate never answers (on srv, as
	// root), one whose forced command never stops talking, one that does
	// not know the teacher's key, one whose host key the teacher never saw.
	noisyd, wrongd, other := sshdtest.Start(t), sshdtest.Start(t), sshdtest.Start(t)

	teacherHome := t.TempDir()
	mk := func(name string) teacherkey.KeyPair {
		kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(teacherHome, name), name)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	key, hang, noisy := mk("kowalski"), mk("hang"), mk("noisy")
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(srv.AuthorizedKeys, fmt.Sprintf("restrict,command=\"sleep 600\" %s\n", hang.PublicLine))
	write(noisyd.AuthorizedKeys, fmt.Sprintf("restrict,command=\"yes\" %s\n", noisy.PublicLine))
	var known string
	for _, s := range []*sshdtest.Server{srv, noisyd, wrongd} {
		data, err := os.ReadFile(s.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		known += string(data)
	}
	knownHosts := filepath.Join(teacherHome, "lab.known_hosts")
	write(knownHosts, known)

	// Five students (the least for make test). s2's grant is full
	// (the control for refusals by level), s4's assist; the others observe.
	grantLevels := []string{levels.Observe.String(), levels.Full.String(), levels.Observe.String(), levels.Assist.String(), levels.Observe.String()}
	lab := newLab(t, grantLevels, bin, key.PublicLine)

	ios, _, out, errOut := iostreams.Test()
	cfg := filepath.Join(teacherHome, ".config", "stem")
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return map[string]string{"HOME": teacherHome}[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: teacherHome, Config: cfg}, nil },
		Self:      func() (string, error) { return filepath.Join(bin, "stemctl"), nil },
		MCPBinary: func() (string, error) { return filepath.Join(bin, "stem-mcp"), nil },
	}
	run := func(args ...string) string {
		t.Helper()
		out.Reset()
		errOut.Reset()
		cmd := NewCmdClass(f)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			t.Fatalf("stemctl class %v: %v\n%s", args, err, errOut)
		}
		return out.String()
	}
	run("init", "lab", "--key", key.PrivatePath, "--ssh-option", "UserKnownHostsFile="+knownHosts,
		"--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR")
	port := fmt.Sprint(srv.Port)
	var names []string
	for i, st := range lab {
		name := fmt.Sprintf("s%d", i+1)
		names = append(names, name)
		run("add", "lab", st.s.Name+"@127.0.0.1", "--port", port, "--as", name)
	}
	run("add", "lab", "root@127.0.0.1", "--port", port, "--as", "sleepy", "--key", hang.PrivatePath)
	run("add", "lab", "root@127.0.0.1", "--port", fmt.Sprint(noisyd.Port), "--as", "noisy", "--key", noisy.PrivatePath)
	run("add", "lab", "root@127.0.0.1", "--port", fmt.Sprint(wrongd.Port), "--as", "wrongkey")
	run("add", "lab", "ghost@127.0.0.1", "--port", fmt.Sprint(closedPort(t)), "--as", "ghost")
	run("add", "lab", "root@127.0.0.1", "--port", fmt.Sprint(other.Port), "--as", "stranger")

	const timeout = 15 * time.Second
	start := time.Now()
	text := run("status", "lab", "--json", "--timeout", timeout.String())
	took := time.Since(start)
	var rows []class.Row
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		t.Fatalf("%v\n%s\n%s", err, text, errOut)
	}
	t.Logf("class status of %d rows: %v (sleepy's timeout %v)", len(rows), took.Round(time.Millisecond), timeout)
	byName := map[string]class.Row{}
	for _, r := range rows {
		byName[r.Student] = r
		t.Logf("%-9s %-17s %5d ms  %s %v", r.Student, r.Reach, r.Millis, r.Why, r.Flags)
	}
	for i, n := range names {
		r := byName[n]
		if r.Reach != class.ReachOK || r.Level != grantLevels[i] || r.ClaimedAccount != lab[i].s.Name || len(r.Flags) != 0 ||
			len(r.Instances) != 1 || r.Instances[0].Instance != instance || r.Instances[0].State != "answers" ||
			r.Instances[0].Task != "1" || r.Instances[0].Card != "hello" || r.Instances[0].Profile != "native-amd64" {
			t.Errorf("%s: %+v\nsshd log:\n%s", n, r, srv.Log())
		}
		// The student's real tmux says when it last had output (the
		// shells' prompts at least); nobody is idle in a new instance.
		if a := r.Instances[0].Activity; a == nil || a.After(time.Now()) || time.Since(*a) > time.Hour || r.Activity == nil {
			t.Errorf("%s: activity %v (row %v)", n, a, r.Activity)
		}
		if time.Duration(r.Millis)*time.Millisecond >= timeout {
			t.Errorf("%s took %d ms: held up by the student who hangs?", n, r.Millis)
		}
	}
	for n, want := range map[string]class.Reach{
		"wrongkey": class.ReachKeyRefused, "ghost": class.ReachRefused, "stranger": class.ReachHostKeyUnknown,
		"sleepy": class.ReachTimeout, "noisy": class.ReachBroken,
	} {
		if r := byName[n]; r.Reach != want || r.Fix == "" || len(r.Flags) == 0 {
			t.Errorf("%s: reach %s (%s), want %s", n, r.Reach, r.Why, want)
		}
	}
	if fix := byName["stranger"].Fix; !strings.Contains(fix, fmt.Sprintf("ssh-keyscan -p %d 127.0.0.1", other.Port)) {
		t.Errorf("the unknown host key's fix does not say how to add it: %s", fix)
	}

	// One student's instance stops: the next status puts them first.
	if r, err := lab[2].a.Run(nil, "down", instance); err != nil || r.Code != 0 {
		t.Fatalf("down: %v %d %s", err, r.Code, r.Stderr)
	}
	run("rm", "lab", "sleepy")
	text = run("status", "lab")
	first := strings.SplitN(text, "\n", 3)[1]
	if !strings.HasPrefix(first, "s3 ") || !strings.Contains(first, "down") || !strings.Contains(first, "instance-down") {
		t.Fatalf("s3 is not flagged:\n%s", text)
	}
	for _, n := range append([]string{"wrongkey", "ghost", "stranger", "noisy"}, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "s3" })...) {
		if !strings.Contains(text, "\n"+n+" ") {
			t.Errorf("the table lacks %s:\n%s", n, text)
		}
	}

	// --watch on a real terminal: the built stemctl redraws the table in
	// place, who needs help first, until Ctrl-C.
	cmd := exec.Command(filepath.Join(bin, "stemctl"), "class", "status", "lab", "--watch", "--every", "1s")
	cmd.Env = []string{"HOME=" + teacherHome, "PATH=" + os.Getenv("PATH"), "STEM_CONFIG_DIR=" + cfg, "TERM=xterm"}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 160, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	const redraw = "\x1b[H\x1b[2J"
	frames := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Split(screen.String(), redraw)[1:]
	}
	for deadline := time.Now().Add(2 * time.Minute); len(frames()) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("--watch did not redraw twice:\n%q", screen.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("--watch after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("--watch did not end on Ctrl-C")
	}
	frame := strings.ReplaceAll(frames()[1], "\r", "")
	lines := strings.Split(frame, "\n")
	if !strings.HasPrefix(lines[0], "class lab ") || !strings.Contains(lines[0], fmt.Sprintf("5 of %d may need help", len(names)+4)) || !strings.HasPrefix(lines[3], "s3 ") {
		t.Fatalf("a redrawn frame:\n%s", frame)
	}

	t.Run("stem-mcp class", func(t *testing.T) {
		// Every student but s3 (whose instance is down) gets a session.
		var open []string
		for _, n := range names {
			if n != "s3" {
				open = append(open, n)
			}
		}
		classMCP(t, bin, []string{"HOME=" + teacherHome, "STEM_CONFIG_DIR=" + cfg}, open, lab[0].a, lab[1].a)
	})

	// One entry for the whole class, written by stemctl teacher config and
	// started by the real Claude Code, which does the MCP handshake.
	t.Run("claude runs the class entry", func(t *testing.T) {
		claude := clitest.Bin(t, "claude")
		cmd := teacher.NewCmdTeacher(f)
		cmd.SetArgs([]string{"config", "--provider", "claude", "--class", "lab", "--scope", "user", "--write"})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			t.Fatalf("teacher config --class: %v\n%s", err, errOut)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		list := exec.CommandContext(ctx, claude, "mcp", "list")
		list.Dir = teacherHome
		list.Env = []string{"HOME=" + teacherHome, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "DISABLE_AUTOUPDATER=1"}
		got, err := list.CombinedOutput()
		want := "stem-class-lab: " + filepath.Join(bin, "stem-mcp") + " class --class lab - "
		if err != nil || !strings.Contains(string(got), want+"✔ Connected") && !strings.Contains(string(got), want+"✓ Connected") {
			t.Fatalf("claude mcp list: %v\n%s\nwant %s✔ Connected", err, got, want)
		}
	})
}

// classMCP runs the built `stem-mcp class` as the teacher's agent would:
// the overview names everyone, sessions open to the students whose
// instance answers and later overviews go over them, student tools are
// forwarded at each grant's level (s1 observe, s2 full), and a crash in
// s1's pane reaches class_events.
func classMCP(t *testing.T, bin string, env []string, open []string, s1, s2 *testenv.Account) {
	c, err := client.NewStdioMCPClient(filepath.Join(bin, "stem-mcp"), env, "class", "--class", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "class-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args map[string]any, v any) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := res.Content[0].(mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: %s", name, text)
		}
		if err := json.Unmarshal([]byte(text), v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
	}
	var ov struct {
		Students []class.Row  `json:"students"`
		Sessions []class.Link `json:"sessions"`
		Notice   string       `json:"notice"`
	}
	start := time.Now()
	for {
		call("class_overview", nil, &ov)
		links := map[string]class.Link{}
		for _, l := range ov.Sessions {
			links[l.Student] = l
		}
		all := true
		for _, n := range open {
			all = all && links[n].Connected
		}
		if all && links["s3"].Error != "" && links["noisy"].Error != "" {
			t.Logf("sessions open to %v after %v; s3: %s; noisy: %s", open, time.Since(start).Round(time.Millisecond), links["s3"].Error, links["noisy"].Error)
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("sessions: %+v", ov.Sessions)
		}
	}
	if len(ov.Students) != len(open)+5 || ov.Students[0].Student != "s3" || !strings.Contains(ov.Notice, "not instructions") {
		t.Fatalf("overview: %+v", ov)
	}
	overSessions(t, call, open, s1)
	forwarded(t, c, ctx, s1, s2)

	// The student's program crashes in their own pane. The student
	// opens a shell window (stem's prompt marks each command line's end)
	// and runs a harmless command first.
	typeLine := shellWindow(t, s1)
	typeLine("true")
	crashed := time.Now()
	typeLine("sh -c 'kill -SEGV $$'")
	var since int64
	for {
		var out struct {
			Events []class.Event `json:"events"`
		}
		call("class_events", map[string]any{"since": since, "wait_ms": 30000}, &out)
		for _, ev := range out.Events {
			since = ev.Seq
			if ev.Student == "s1" && ev.Type == "program_crashed" {
				if ev.Instance != instance || ev.Signal != "SIGSEGV" {
					t.Fatalf("event: %+v", ev)
				}
				t.Logf("crash in s1's pane to class_events: %v (keys sent through stemctl exec)", time.Since(crashed).Round(time.Millisecond))
				return
			}
		}
		if time.Since(crashed) > time.Minute {
			t.Fatalf("no program_crashed from s1 within a minute (last seq %d)", since)
		}
	}
}

// teacherClass is the teacher's stemctl in process: a Factory on
// teacherHome with the built binaries in bin, what it prints, and run,
// which runs `stemctl class ARGS` and fails the test on an error.
func teacherClass(t *testing.T, teacherHome, bin string) (f *cmdutil.Factory, out *bytes.Buffer, run func(args ...string)) {
	ios, _, out, errOut := iostreams.Test()
	cfg := filepath.Join(teacherHome, ".config", "stem")
	f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return map[string]string{"HOME": teacherHome}[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: teacherHome, Config: cfg}, nil },
		Self:      func() (string, error) { return filepath.Join(bin, "stemctl"), nil },
		MCPBinary: func() (string, error) { return filepath.Join(bin, "stem-mcp"), nil },
	}
	run = func(args ...string) {
		t.Helper()
		cmd := NewCmdClass(f)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			t.Fatalf("stemctl class %v: %v\n%s", args, err, errOut)
		}
	}
	return f, out, run
}
