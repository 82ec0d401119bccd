// Package sshdtest starts a real OpenSSH sshd for tests: its own config,
// host key and authorized_keys in a temporary directory, listening on a
// loopback port, logging to a file. Clients use the real ssh with options
// that keep them away from the user's own ~/.ssh (no config, a private
// known_hosts, only the key given).
package sshdtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

// Sshd is the path of OpenSSH's daemon.
const Sshd = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	Dir            string
	Port           int
	User           string // the account it logs in to (the current one)
	AuthorizedKeys string // the only authorized_keys file it reads
	KnownHosts     string // a known_hosts for clients, holding its host key
	LogFile        string
	cmd            *exec.Cmd
}

// Key is a client key pair on disk.
type Key struct {
	Private    string
	PublicLine string // "ssh-ed25519 AAAA... comment"
}

// NewKey writes an unencrypted ed25519 key pair under dir.
func NewKey(t testing.TB, dir, name string) Key {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(sk, name)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + name
	if err := os.WriteFile(p+".pub", []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Key{Private: p, PublicLine: line}
}

// Start runs sshd on a free loopback port until the test ends. extra
// lines are appended to its sshd_config. The test must run as root (sshd
// needs it to start sessions); otherwise it fails saying so.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	needs.Real(t, "sshd")
	if _, err := os.Stat(Sshd); err != nil {
		t.Fatalf("%s not found: apt-get install openssh-server", Sshd)
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("ssh not found: apt-get install openssh-client")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the sshd tests start their own sshd and must run as root (sshd needs privilege separation)")
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("mkdir /run/sshd (sshd's privilege separation directory): %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{Dir: dir, User: u.Username, AuthorizedKeys: filepath.Join(dir, "authorized_keys"),
		KnownHosts: filepath.Join(dir, "known_hosts"), LogFile: filepath.Join(dir, "sshd.log")}

	_, hsk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(hsk, "host")
	if err != nil {
		t.Fatal(err)
	}
	hostKey := filepath.Join(dir, "host_ed25519")
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hsk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.AuthorizedKeys, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		kh := fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
		if err := os.WriteFile(s.KnownHosts, []byte(kh+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(cfg, []byte(s.config(hostKey, extra)+strings.Join(extra, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(cfg); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("start sshd: %v", lastErr)
	return nil
}

// config is a complete sshd_config: forwarding, agent forwarding and ttys
// are allowed server-wide, so a refusal in the tests comes from the key's
// `restrict` and not from here.
//
// SetEnv SHLVL=1 makes bash skip ~/.bashrc for the forced command (it
// sources it for ssh commands only at shell level 1). The tests run as the
// machine's root, whose ~/.bashrc on the CI hosts runs pyenv: ~0.3 s a
// session, and a pyenv lock left behind by a killed session stalled every
// later one for 60 s (the gate tests then took 9 minutes). What the
// account's shell init costs is measured separately (BenchmarkSSHInitialize
// "bashrc-as-is"). sshd takes only the first SetEnv line, so a caller's
// own SetEnv line in extra replaces this one.
func (s *Server) config(hostKey string, extra []string) string {
	setEnv := "SetEnv SHLVL=1\n"
	for _, l := range extra {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(l)), "setenv") {
			setEnv = ""
		}
	}
	return fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
AllowAgentForwarding yes
AllowStreamLocalForwarding yes
PermitTTY yes
X11Forwarding yes
PermitUserEnvironment no
PermitUserRC yes
AcceptEnv LANG LC_* STEM_* XDG_*
MaxStartups 200:30:400
%sMaxSessions 50
LogLevel VERBOSE
Subsystem sftp internal-sftp
`, s.Port, hostKey, filepath.Join(s.Dir, "sshd.pid"), s.AuthorizedKeys, setEnv)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(cfg string) error {
	logf, err := os.OpenFile(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// -D: stay in the foreground (we own the process); -e: log to stderr.
	s.cmd = exec.Command(Sshd, "-D", "-e", "-f", cfg)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", Sshd, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("sshd exited: %v\n%s", err, s.Log())
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	return errors.New("sshd did not listen within 10s\n" + s.Log())
}

// Stop kills the daemon: nothing listens on Port any more. Sessions it
// started live on, as with a real sshd.
func (s *Server) Stop() { s.stop() }

func (s *Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

// WaitSessions waits until sshd has no session left (no child process),
// for at most d. A test calls it before it removes what a session's
// command writes to: a session ends a moment after its client does.
func (s *Server) WaitSessions(d time.Duration) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	pid := strconv.Itoa(s.cmd.Process.Pid)
	path := "/proc/" + pid + "/task/" + pid + "/children"
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(data)) == "" {
			return nil // sshd is gone, or has no session
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd still has sessions after %v: pids %s", d, strings.TrimSpace(string(data)))
		}
	}
}

// Log returns sshd's log so far.
func (s *Server) Log() string {
	data, _ := os.ReadFile(s.LogFile)
	return string(data)
}

// Host is USER@127.0.0.1.
func (s *Server) Host() string { return s.User + "@127.0.0.1" }

// ClientOptions are the ssh -o options that make a client hermetic:
// this server's known_hosts, nothing from the user's files.
func (s *Server) ClientOptions() []string {
	return []string{"UserKnownHostsFile=" + s.KnownHosts, "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes", "LogLevel=ERROR"}
}

// Args returns ssh's argv (without "ssh") to run remote with key. pre
// comes first, so its -o options win (ssh keeps the first value given).
func (s *Server) Args(key string, pre []string, remote ...string) []string {
	args := append([]string{"-F", "/dev/null"}, pre...)
	args = append(args, "-p", strconv.Itoa(s.Port), "-i", key,
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes", "-o", "ControlPath=none")
	for _, o := range s.ClientOptions() {
		args = append(args, "-o", o)
	}
	args = append(args, s.Host())
	return append(args, remote...)
}

// Result is one ssh run.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs ssh with key and returns its output and exit code (255 is
// ssh's own failure, such as a refused key).
func (s *Server) Run(t testing.TB, key string, pre []string, remote ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", s.Args(key, pre, remote...)...)
	cmd.Stdin = strings.NewReader("")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("ssh: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ssh %v did not finish within 30s", remote)
	}
	return r
}

// StemMCP returns the real stem-mcp: $STEM_MCP_BIN (what `make test`
// builds), or else a build of ./cmd/stem-mcp in the test's temporary
// directory (Go's build cache makes repeated builds cheap). It fails the test
// if that binary does not run the gate.
func StemMCP(t testing.TB) string {
	t.Helper()
	needs.Real(t, "sshd")
	path := os.Getenv("STEM_MCP_BIN")
	if path == "" {
		path = filepath.Join(t.TempDir(), "stem-mcp")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/stem-mcp")
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/stem-mcp: %v\n%s", err, out)
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	// Without arguments the gate reports a bad forced command (exit 2).
	out, err := exec.Command(path, "gate").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "stem-mcp gate: [bad_setup] bad forced command") {
		t.Fatalf("%s does not run the gate (`stem-mcp gate` must call gate.Main): %v\n%s", path, err, out)
	}
	return path
}

// repoRoot is the module's top directory (this file is internal/gate/sshdtest).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}
