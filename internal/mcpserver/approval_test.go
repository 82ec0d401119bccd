package mcpserver_test

// Approvals against a real tmux with the student at a real terminal: a
// tmux client attached through a pseudo-terminal, whose keyboard is the
// pty's master. The student answers with keys; agents try every way they
// have to answer for themselves.

import (
	"bytes"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/testenv"
)

// terminal is the student's terminal: a tmux client on a pty.
type terminal struct {
	t   testing.TB
	pty io.Writer
	mu  sync.Mutex
	out bytes.Buffer
	cmd *exec.Cmd
}

func attachTerminal(t testing.TB, in *testenv.Instance) *terminal {
	t.Helper()
	cmd := exec.Command("tmux", "-S", in.Dir.Tmux(), "attach-session", "-t", "stem")
	cmd.Env = append(slices.Clone(in.Env), "TERM=xterm-256color", "TMUX=")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, pty: f, cmd: cmd}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); f.Close() })
	waitUntil(t, 10*time.Second, "the student's terminal attached", func() bool {
		return strings.Contains(in.Tmux(t, "list-clients", "-F", "#{client_control_mode}"), "0")
	})
	return term
}

// mark is the length of the output so far: waitFor looks after it.
func (term *terminal) mark() int {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.Len()
}

// waitFor waits until the terminal shows s after mark.
func (term *terminal) waitFor(mark int, s string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		term.mu.Lock()
		ok := bytes.Contains(term.out.Bytes()[mark:], []byte(s))
		term.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	return false
}

func (term *terminal) press(key string) {
	if _, err := io.WriteString(term.pty, key); err != nil {
		term.t.Fatal(err)
	}
}

type callResult struct {
	out   map[string]any
	etext string
	err   error
}

func (s *session) async(name string, args map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		out, etext, err := s.call(name, args)
		ch <- callResult{out, etext, err}
	}()
	return ch
}

func TestApprovals(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	term := attachTerminal(t, in)
	in.SetAgentPolicy(t, `approve = ["nvim_hint"]`)
	s := connect(t, in, "assist", "--approval-timeout", "4s")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	hint := map[string]any{"path": "t1/words.c", "line": 3, "text": "look here"}
	const question = "y: allow once  a: allow it all for 10 min  n: no"

	t.Run("accepted", func(t *testing.T) {
		m := term.mark()
		res := s.async("nvim_hint", hint)
		if !term.waitFor(m, question, 10*time.Second) {
			term.mu.Lock()
			tail := term.out.String()[m:]
			term.mu.Unlock()
			t.Fatalf("the student's terminal shows no question: %q", tail[max(0, len(tail)-1200):])
		}
		term.mu.Lock()
		shown := term.out.String()[m:]
		term.mu.Unlock()
		if !strings.Contains(shown, "nvim_hint") || !strings.Contains(shown, "look here") {
			t.Fatalf("the question does not show the exact action: %q", shown)
		}
		term.press("y")
		r := <-res
		if r.err != nil || r.etext != "" {
			t.Fatalf("accepted: %v %s", r.err, r.etext)
		}
	})

	t.Run("denied", func(t *testing.T) {
		// Single use: the next call asks again.
		m := term.mark()
		res := s.async("nvim_hint", hint)
		if !term.waitFor(m, question, 10*time.Second) {
			t.Fatal("the second call was not asked about")
		}
		term.press("n")
		if r := <-res; r.etext == "" || !strings.Contains(r.etext, "said no") {
			t.Fatalf("denied: %v %q", r.err, r.etext)
		}
	})

	t.Run("for a while", func(t *testing.T) {
		m := term.mark()
		res := s.async("nvim_hint", hint)
		if !term.waitFor(m, question, 10*time.Second) {
			t.Fatal("no question")
		}
		term.press("a")
		if r := <-res; r.err != nil || r.etext != "" {
			t.Fatalf("allowed for a while: %v %s", r.err, r.etext)
		}
		// The next call is not asked about: it returns with no key
		// pressed, and no new question shows.
		m = term.mark()
		s.ok("nvim_hint", hint)
		term.mu.Lock()
		again := bytes.Contains(term.out.Bytes()[m:], []byte(question))
		term.mu.Unlock()
		if again {
			t.Fatal("asked again within the student's 10 minutes")
		}
	})

	t.Run("expired, while agents try to answer it", func(t *testing.T) {
		// Another agent: the student's "a" above covers only that one.
		other := connect(t, in, "assist", "--approval-timeout", "4s")
		full := connect(t, in, "full")
		m := term.mark()
		start := time.Now()
		res := other.async("nvim_hint", hint)
		if !term.waitFor(m, question, 10*time.Second) {
			t.Fatal("no question")
		}
		// Every way the agents have to press y: keys into the allowed
		// pane (assist), into any pane and the editor (full), a shell
		// command in the session (full), Neovim's input (full).
		edit := st.pane("edit")
		other.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "y"})
		full.ok("pane_send_keys", map[string]any{"pane": edit, "keys": "y"})
		full.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "{C-u}"})
		full.ok("pane_run", map[string]any{"pane": shell, "command": "tmux send-keys y; tmux send-keys Enter; true"})
		full.ok("nvim_lua", map[string]any{"code": "vim.api.nvim_input('y')"})
		r := <-res
		if r.etext == "" || !strings.Contains(r.etext, "did not answer within 4s") {
			t.Fatalf("an agent answered its own approval: %v %q", r.err, r.etext)
		}
		if el := time.Since(start); el < 4*time.Second {
			t.Fatalf("refused after %s, before the timeout", el)
		}
		term.press("\x1b") // the student dismisses the stale question
	})

	t.Run("audit", func(t *testing.T) {
		es, _ := readAudit(t, in.Dirs.State)
		var got []string
		for _, e := range es {
			switch e.Event {
			case audit.ApprovalRequest:
				if !strings.Contains(e.Detail, "nvim_hint") {
					t.Errorf("request without the action: %+v", e)
				}
				got = append(got, "request")
			case audit.ApprovalDecision, audit.ApprovalExpired:
				if strings.Contains(e.Detail, "the student allowed this client until") {
					got = append(got, "within")
					continue
				}
				if e.Intent == 0 || (e.Event == audit.ApprovalDecision && !strings.Contains(e.Detail, "the student, at tmux client")) {
					t.Errorf("decision without its request or who decided: %+v", e)
				}
				got = append(got, e.Result)
			}
		}
		if want := []string{"request", "granted", "request", "denied", "request", "granted", "within", "request", "refused"}; !slices.Equal(got, want) {
			t.Fatalf("approval entries %v, want %v", got, want)
		}
	})
}
