package teacher

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/tcprelay"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// stemctlErr runs `stemctl teacher ARGS` and returns its output and error.
func (r *teacherRig) stemctlErr(args ...string) (string, error) {
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return map[string]string{"HOME": r.home}[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: r.home}, nil },
		Self:      func() (string, error) { return r.self, nil },
	}
	cmd := NewCmdTeacher(f)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

// ipv6Flags are the rig's flags for reaching its sshd at user@HOST6 (::1),
// with a known_hosts that has the host key under [::1]:PORT.
func (r *teacherRig) ipv6Flags(t *testing.T, host6 string) []string {
	t.Helper()
	kh, err := os.ReadFile(r.srv.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	kh6 := filepath.Join(t.TempDir(), "known_hosts6")
	line := strings.Replace(string(kh), "[127.0.0.1]:", "[::1]:", 1)
	if err := os.WriteFile(kh6, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--host", r.srv.User + "@" + host6, "--key", r.key, "--port", strconv.Itoa(r.srv.Port),
		"--ssh-option", "UserKnownHostsFile=" + kh6, "--ssh-option", "GlobalKnownHostsFile=/dev/null",
		"--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR"}
}

// An entry for an IPv6 address (bare or in brackets) connects through
// teacher dial to an sshd listening on [::1].
func TestDialIPv6ThroughSSHD(t *testing.T) {
	r := newTeacherRig(t, "ListenAddress ::1")
	useSSHConfig(t, "")
	for _, host6 := range []string{"::1", "[::1]"} {
		flags := r.ipv6Flags(t, host6)
		out := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"config", "--provider", "gemini", "--json"}, flags...)...)
		var res struct {
			Entry struct {
				Args []string `json:"args"`
			} `json:"entry"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		pc := "ProxyCommand=" + r.self + " teacher dial '%h' %p"
		if a := res.Entry.Args; !slices.Contains(a, pc) || a[len(a)-2] != r.srv.User+"@::1" {
			t.Fatalf("--host %s: entry %v", host6, a)
		}
		st := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"status", "--json"}, flags...)...)
		if !strings.Contains(st, `"grant": "kowalski"`) {
			t.Fatalf("status over ::1: %s", st)
		}
	}
	if log := r.srv.Log(); !strings.Contains(log, "Connection from ::1 port") {
		t.Fatalf("sshd saw no connection from ::1:\n%s", log)
	}
}

// A port nothing listens on: ssh's error carries dial's, which names the
// address and says the connection was refused, on IPv4 and IPv6.
func TestDialRefusedPort(t *testing.T) {
	r := newTeacherRig(t)
	useSSHConfig(t, "")
	for _, tc := range []struct{ network, listen, host, addr string }{
		{"tcp4", "127.0.0.1:0", "127.0.0.1", "127.0.0.1"},
		{"tcp6", "[::1]:0", "::1", "[::1]"},
	} {
		l, err := net.Listen(tc.network, tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		out, err := r.stemctlErr("status", "--host", r.srv.User+"@"+tc.host, "--key", r.key, "--port", port, "--timeout", "20s")
		want := "stemctl: connect to " + tc.addr + ":" + port + ": dial tcp " + tc.addr + ":" + port + ": connect: connection refused"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v (want %q)\n%s", tc.network, err, want, out)
		}
	}
}

// dialProcs are the live `stemctl teacher dial HOST PORT` processes of this
// stemctl (a zombie has exited: its parent, or init, reaps it).
func dialProcs(t *testing.T, self, host, port string) []int {
	t.Helper()
	want := strings.Join([]string{self, "teacher", "dial", host, port}, "\x00") + "\x00"
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(cmdline) != want {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) STATE ...
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// After the ssh session ends, however it ends, no teacher dial is left
// running: ssh ends normally (stdin closed), is killed without the SIGHUP
// it sends its ProxyCommand when it exits, is stopped with SIGTERM, gives
// up early (unknown host key), or is killed while the server never
// answers nor closes.
func TestDialEndsWithSSH(t *testing.T) {
	r := newTeacherRig(t)
	port := strconv.Itoa(r.srv.Port)
	entry := func(t *testing.T, opts []string, port int) []string {
		tg := teacherkey.Target{Host: r.srv.Host(), Key: r.key, Port: port, SSHOptions: opts, Dial: r.self}
		e, err := Entry(tg, "anna", "")
		if err != nil {
			t.Fatal(err)
		}
		return append([]string{"-F", "/dev/null"}, e.Args...)
	}
	// start runs ssh; its stdin stays open until closed. Its stderr is a
	// file, which a leftover dial (it inherits it) cannot keep Wait on.
	start := func(t *testing.T, args []string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, func() string) {
		cmd := exec.Command("ssh", args...)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		errFile := filepath.Join(t.TempDir(), "stderr")
		if cmd.Stderr, err = os.Create(errFile); err != nil {
			t.Fatal(err)
		}
		defer cmd.Stderr.(*os.File).Close()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, in, bufio.NewReader(out), func() string { b, _ := os.ReadFile(errFile); return string(b) }
	}
	exited := func(cmd *exec.Cmd) chan error {
		c := make(chan error, 1)
		go func() { c <- cmd.Wait() }()
		return c
	}
	session := func(t *testing.T) (*exec.Cmd, io.WriteCloser) {
		cmd, in, out, errOut := start(t, entry(t, r.srv.ClientOptions(), r.srv.Port))
		// The gate answers initialize: the session is up, through dial.
		fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		line, err := out.ReadString('\n')
		if err != nil || !strings.Contains(line, `"serverInfo"`) {
			t.Fatalf("no initialize reply: %v %q\n%s", err, line, errOut())
		}
		if n := len(dialProcs(t, r.self, "127.0.0.1", port)); n != 1 {
			t.Fatalf("%d teacher dial processes during the session, want 1", n)
		}
		return cmd, in
	}
	gone := func(t *testing.T, host, port string, within time.Duration) {
		t.Helper()
		waitFor(t, "teacher dial gone", within, func() bool { return len(dialProcs(t, r.self, host, port)) == 0 })
	}

	t.Run("stdin closed", func(t *testing.T) {
		cmd, in := session(t)
		in.Close()
		select {
		case <-exited(cmd):
		case <-time.After(20 * time.Second):
			t.Fatal("ssh did not end after its stdin closed")
		}
		gone(t, "127.0.0.1", port, 5*time.Second)
	})
	t.Run("ssh killed", func(t *testing.T) {
		cmd, _ := session(t)
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited(cmd)
		gone(t, "127.0.0.1", port, 5*time.Second)
	})
	t.Run("ssh terminated", func(t *testing.T) {
		cmd, _ := session(t)
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited(cmd)
		gone(t, "127.0.0.1", port, 5*time.Second)
	})
	t.Run("ssh gives up early", func(t *testing.T) {
		cmd, _, _, errOut := start(t, entry(t, []string{"UserKnownHostsFile=/dev/null", "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes"}, r.srv.Port))
		err := <-exited(cmd)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 255 || !strings.Contains(errOut(), "Host key verification failed") {
			t.Fatalf("ssh with no known host key: %v\n%s", err, errOut())
		}
		gone(t, "127.0.0.1", port, 5*time.Second)
	})
	t.Run("server never answers", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				accepted <- c // held open, never written to
			}
		}()
		silent := l.Addr().(*net.TCPAddr).Port
		cmd, _, _, _ := start(t, entry(t, r.srv.ClientOptions(), silent))
		select {
		case c := <-accepted:
			defer c.Close()
		case <-time.After(20 * time.Second):
			t.Fatal("dial never connected")
		}
		sp := strconv.Itoa(silent)
		waitFor(t, "teacher dial running", 10*time.Second, func() bool { return len(dialProcs(t, r.self, "127.0.0.1", sp)) == 1 })
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited(cmd)
		gone(t, "127.0.0.1", sp, tcprelay.CloseGrace+5*time.Second)
	})
}

// A ProxyUseFdpass line in the teacher's configuration (which expects the
// ProxyCommand to pass ssh a socket) does not break the entry: dial copies
// bytes, and the entry says ProxyUseFdpass=no.
func TestEntryWithProxyUseFdpassInSSHConfig(t *testing.T) {
	r := newTeacherRig(t)
	useSSHConfig(t, "Host *\n  ProxyUseFdpass yes\n")
	out := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"status", "--json"}, r.flags...)...)
	if !strings.Contains(out, `"grant": "kowalski"`) || strings.Contains(out, "without stemctl teacher dial") {
		t.Fatalf("status:\n%s", out)
	}
}

// A student controls their own sshd and authorized_keys: with the key's
// restrict taken off, whatever the teacher's ssh offers is theirs. A
// teacher's configuration that forwards the agent and a port for every
// host must not do so for the entry. The control run (plain ssh with the
// same configuration) shows that it would.
func TestEntryForwardsNothingToTheStudent(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	kp, err := teacherkey.Keygen(filepath.Join(dir, "stem_k"), "k")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fwd := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// No restrict: the student's sshd allows forwarding (sshdtest does).
	cmdline := fmt.Sprintf(`command="echo agent=$SSH_AUTH_SOCK; if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo fwd=open; else echo fwd=closed; fi" `, fwd)
	if err := os.WriteFile(srv.AuthorizedKeys, []byte(cmdline+kp.PublicLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentSock := filepath.Join(dir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", agentSock)
	if err := agent.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	waitFor(t, "ssh-agent socket", 10*time.Second, func() bool { _, err := os.Stat(agentSock); return err == nil })
	cfg := filepath.Join(dir, "ssh_config")
	conf := fmt.Sprintf("Host *\n  ForwardAgent yes\n  RemoteForward 127.0.0.1:%d 127.0.0.1:%d\n  ForwardX11 yes\n", fwd, srv.Port)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args []string) string {
		cmd := exec.Command("ssh", append([]string{"-F", cfg}, args...)...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agentSock)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ssh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	base := []string{"-T", "-i", kp.PrivatePath, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ControlPath=none", "-p", strconv.Itoa(srv.Port)}
	for _, o := range srv.ClientOptions() {
		base = append(base, "-o", o)
	}
	if out := run(append(base, srv.Host(), "status")); !strings.Contains(out, "agent=/") || !strings.Contains(out, "fwd=open") {
		t.Fatalf("control run (the entry's options before this fix) did not forward, the test proves nothing:\n%s", out)
	}

	self := filepath.Join(testenv.Binary(t, "stemctl", "./cmd/stemctl"), "stemctl")
	args, err := teacherkey.Target{Host: srv.Host(), Key: kp.PrivatePath, Port: srv.Port, SSHOptions: srv.ClientOptions(), Dial: self}.Command("status")
	if err != nil {
		t.Fatal(err)
	}
	if out := run(args); !strings.Contains(out, "agent=\n") || !strings.Contains(out, "fwd=closed") {
		t.Fatalf("the entry forwarded to the student's machine:\n%s", out)
	}
}

// Installed as documented, stem-dial sits beside stemctl: the entries then
// name it (it starts in a fraction of stemctl's time) and connect through
// it to the real sshd.
func TestStemDialBesideStemctl(t *testing.T) {
	r := newTeacherRig(t)
	dir := t.TempDir()
	data, err := os.ReadFile(r.self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stemctl"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Built here, not with testenv.Binary: beside the shared stemctl it
	// would change the entries of every other test.
	dial := filepath.Join(dir, teacherkey.DialBinary)
	build := exec.Command("go", "build", "-trimpath", "-o", dial, "./cmd/stem-dial")
	build.Dir, build.Env = testenv.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stem-dial: %v\n%s", err, out)
	}
	r.self = filepath.Join(dir, "stemctl")

	out := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"config", "--provider", "claude"}, r.flags...)...)
	if want := dial + " '%h' %p"; !strings.Contains(out, want) || strings.Contains(out, "teacher dial") {
		t.Fatalf("config does not name %s:\n%s", want, out)
	}
	out = r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"status", "--json"}, r.flags...)...)
	if !strings.Contains(out, `"grant": "kowalski"`) {
		t.Fatalf("status through stem-dial:\n%s", out)
	}
	// A stem-dial that is not executable is passed over for stemctl's own.
	if err := os.Chmod(dial, 0o644); err != nil {
		t.Fatal(err)
	}
	out = r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"config", "--provider", "claude"}, r.flags...)...)
	if want := r.self + " teacher dial '%h' %p"; !strings.Contains(out, want) {
		t.Fatalf("config with a non-executable stem-dial does not fall back to %s:\n%s", want, out)
	}
}

// A student's machine whose host key is not in known_hosts: ssh's bare
// "Host key verification failed." comes with what to check and the
// command that adds the key.
func TestStatusUnknownHostKeyExplained(t *testing.T) {
	r := newTeacherRig(t)
	useSSHConfig(t, "")
	flags := []string{"--host", r.srv.Host(), "--key", r.key, "--port", strconv.Itoa(r.srv.Port),
		"--ssh-option", "UserKnownHostsFile=" + filepath.Join(t.TempDir(), "empty"), "--ssh-option", "GlobalKnownHostsFile=/dev/null",
		"--ssh-option", "StrictHostKeyChecking=yes"}
	out, err := r.stemctlErr(append([]string{"status", "--timeout", "20s"}, flags...)...)
	if err == nil {
		t.Fatalf("status with an unknown host key succeeded:\n%s", out)
	}
	for _, want := range []string{"Host key verification failed", "not in your known_hosts", "ssh-keyscan -p " + strconv.Itoa(r.srv.Port)} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal lacks %q: %v", want, err)
		}
	}
}
