// Package tmuxtest starts a real tmux server for tests: a private socket in
// a short temporary directory, a session named "stem" whose shells are bash
// with stem's prompt integration (tmux.PromptIntegration) sourced, and
// kill-server plus removal of the directory when the test ends.
package tmuxtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv/leftover"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/tmux"
)

// Session is the session name Start creates.
const Session = "stem"

// Prompt is the PS1 of the test shells.
const Prompt = "stem$ "

// Server is a running tmux server.
type Server struct {
	Dir    string // the private temporary directory
	Socket string // Dir/t.sock
	// Home is the shells' $HOME (their history file lives there).
	Home string
	// Env is the environment the server and its shells started with.
	Env []string
}

// Options tune Start.
type Options struct {
	Width, Height int // session size; default 120x40
	// NoIntegration starts plain `bash --norc` shells instead.
	NoIntegration bool
}

// Need skips the test under -short and fails it when a program the tests
// run is missing, naming the Debian package that provides it.
func Need(t testing.TB, program, debianPackage string) string {
	t.Helper()
	return needs.Program(t, program, debianPackage)
}

// Start starts a server and registers its cleanup.
func Start(t testing.TB, opts ...Options) *Server {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Width == 0 {
		o.Width = 120
	}
	if o.Height == 0 {
		o.Height = 40
	}
	Need(t, "tmux", "tmux")
	bash := Need(t, "bash", "bash")
	leftover.Sweep()

	// t.TempDir() paths carry the test name and can pass the 108-byte
	// AF_UNIX limit; a short directory in /tmp cannot.
	dir, err := os.MkdirTemp("/tmp", "stx")
	if err != nil {
		t.Fatalf("tmuxtest: %v", err)
	}
	s := &Server{Dir: dir, Socket: filepath.Join(dir, "t.sock"), Home: filepath.Join(dir, "home")}
	t.Cleanup(func() { s.kill(t); os.RemoveAll(dir) })
	if len(s.Socket) >= 100 {
		t.Fatalf("tmuxtest: socket path %q is %d bytes", s.Socket, len(s.Socket))
	}
	if err := os.Mkdir(s.Home, 0o700); err != nil {
		t.Fatalf("tmuxtest: %v", err)
	}

	rc := filepath.Join(dir, "bashrc")
	var rcText strings.Builder
	fmt.Fprintf(&rcText, "PS1=%s\nHISTFILE=%s\nHISTSIZE=1000\nunset HISTCONTROL PROMPT_COMMAND\n",
		shq(Prompt), shq(filepath.Join(s.Home, ".bash_history")))
	if !o.NoIntegration {
		rcText.WriteString(tmux.PromptIntegration)
	}
	if err := os.WriteFile(rc, []byte(rcText.String()), 0o600); err != nil {
		t.Fatalf("tmuxtest: %v", err)
	}
	shell := fmt.Sprintf("exec %s --rcfile %s -i", shq(bash), shq(rc))
	if o.NoIntegration {
		shell = fmt.Sprintf("exec %s --norc --noprofile -i", shq(bash))
	}
	conf := filepath.Join(dir, "tmux.conf")
	confText := fmt.Sprintf("set -g default-command %s\nset -g history-limit 5000\nset -g default-terminal screen\n",
		tmuxQuote(shell))
	if err := os.WriteFile(conf, []byte(confText), 0o600); err != nil {
		t.Fatalf("tmuxtest: %v", err)
	}
	s.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.Home,
		"LANG=C.UTF-8",
		"SHELL=" + bash,
		"TERM=xterm-256color",
		leftover.Env(), // a later run removes the server if this one times out
	}
	if _, err := s.tmux("-f", conf, "new-session", "-d", "-s", Session,
		"-x", fmt.Sprint(o.Width), "-y", fmt.Sprint(o.Height)); err != nil {
		t.Fatalf("tmuxtest: starting server: %v", err)
	}
	if !o.NoIntegration {
		s.WaitPrompt(t, "%0")
	} else {
		time.Sleep(200 * time.Millisecond)
	}
	return s
}

// Tmux runs one tmux command against the server in a new client process
// (for test setup and inspection, not for the code under test).
func (s *Server) Tmux(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.tmux(args...)
	if err != nil {
		t.Fatalf("tmuxtest: tmux %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (s *Server) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-u", "-S", s.Socket}, args...)...)
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// WaitPrompt waits (up to 10s) until pane shows the test prompt on its
// last non-empty line.
func (s *Server) WaitPrompt(t testing.TB, pane string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := s.tmux("capture-pane", "-p", "-t", pane)
		if err == nil {
			lines := strings.Split(strings.TrimRight(out, "\n "), "\n")
			if last := lines[len(lines)-1]; strings.HasSuffix(last, strings.TrimSpace(Prompt)) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tmuxtest: no prompt in %s after 10s; screen:\n%s (err %v)", pane, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server now (the test of a server dying under a client).
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if _, err := s.tmux("kill-server"); err != nil {
		t.Fatalf("tmuxtest: kill-server: %v", err)
	}
}

func (s *Server) kill(t testing.TB) {
	if _, err := s.tmux("kill-server"); err != nil && !strings.Contains(err.Error(), "no server") &&
		!strings.Contains(err.Error(), "error connecting") {
		t.Logf("tmuxtest: kill-server: %v", err)
	}
}

// Dial connects a tmux.Client to the server's session and closes it when
// the test ends.
func (s *Server) Dial(t testing.TB) *tmux.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tmux.Dial(ctx, tmux.Options{Socket: s.Socket, Session: Session})
	if err != nil {
		t.Fatalf("tmuxtest: dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func tmuxQuote(s string) string {
	q, err := tmux.Quote(s)
	if err != nil {
		panic(err)
	}
	return q
}
