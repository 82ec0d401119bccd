package mcpserver_test

// Approvals are asked and answered on the host (internal/decision): the
// student's answers here come through the host spool, as `stemctl attach`
// and `stemctl approvals` give them. Agents, and a tmux client of the
// container's own at a real terminal, try every way they have to answer
// for themselves.

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
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/errcode"
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
	code  errcode.Code
	err   error
}

func (s *session) async(name string, args map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		out, etext, code, err := s.callCoded(name, args)
		ch <- callResult{out, etext, code, err}
	}()
	return ch
}

// host is the student's host input: it shows the instance's questions
// and answers them as the test says.
type host struct {
	t     testing.TB
	spool *decision.Spool
}

func hostInput(t testing.TB, in *testenv.Instance) *host {
	t.Helper()
	sp, err := decision.Open(in.Dirs.State, in.Name)
	if err != nil {
		t.Fatal(err)
	}
	release, err := sp.Attend("host terminal /dev/pts/test (stemctl attach)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return &host{t: t, spool: sp}
}

// question waits for the one open question.
func (h *host) question() decision.Question {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if qs, err := h.spool.Pending(); err == nil && len(qs) > 0 {
			return qs[0]
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	h.t.Fatal("no question on the host within 10s")
	return decision.Question{}
}

func (h *host) answer(q decision.Question, c decision.Choice) {
	h.t.Helper()
	if err := h.spool.Answer(decision.Answer{ID: q.ID, Choice: c, Input: "host terminal /dev/pts/test (stemctl attach)"}); err != nil {
		h.t.Fatal(err)
	}
}

func TestApprovals(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	in.SetAgentPolicy(t, `approve = ["nvim_hint"]`)
	s := connect(t, in, "assist", "--approval-timeout", "4s")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	hint := map[string]any{"path": "t1/words.c", "line": 3, "text": "look here"}

	t.Run("nobody to ask", func(t *testing.T) {
		// No host input shows questions: refused at once, not after
		// the timeout.
		start := time.Now()
		_, etext, code, err := s.callCoded("nvim_hint", hint)
		if err != nil || code != errcode.NoWatcher || !strings.Contains(etext, "no stem terminal open on the host") {
			t.Fatalf("asked with nobody on the host: %v %s %q", err, code, etext)
		}
		if el := time.Since(start); el >= 4*time.Second {
			t.Fatalf("refused after %s: it waited for the timeout", el)
		}
	})

	h := hostInput(t, in)
	t.Run("accepted", func(t *testing.T) {
		res := s.async("nvim_hint", hint)
		q := h.question()
		if !strings.Contains(q.Text, "nvim_hint") || !strings.Contains(q.Text, "look here") || q.Kind != "approval" {
			t.Fatalf("the question does not show the exact action: %+v", q)
		}
		h.answer(q, decision.Yes)
		r := <-res
		if r.err != nil || r.etext != "" {
			t.Fatalf("accepted: %v %s", r.err, r.etext)
		}
	})

	t.Run("denied", func(t *testing.T) {
		// Single use: the next call asks again.
		res := s.async("nvim_hint", hint)
		h.answer(h.question(), decision.No)
		if r := <-res; r.code != errcode.ApprovalRefused || !strings.Contains(r.etext, "said no") {
			t.Fatalf("denied: %v %q", r.err, r.etext)
		}
	})

	t.Run("for a while", func(t *testing.T) {
		res := s.async("nvim_hint", hint)
		h.answer(h.question(), decision.While)
		if r := <-res; r.err != nil || r.etext != "" {
			t.Fatalf("allowed for a while: %v %s", r.err, r.etext)
		}
		// The next call is not asked about: it returns with nobody
		// answering.
		s.ok("nvim_hint", hint)
	})

	t.Run("expired, while agents and the container's own terminal try to answer it", func(t *testing.T) {
		// Another agent: the student's "for a while" above covers only
		// that one.
		other := connect(t, in, "assist", "--approval-timeout", "4s")
		full := connect(t, in, "full")
		// A tmux client of the container's, at a real terminal, the
		// most recently active: its keys are a keyboard to tmux.
		attacker := attachTerminal(t, in)
		start := time.Now()
		res := other.async("nvim_hint", hint)
		h.question()
		// Every way the agents have to press y: keys into the allowed
		// pane (assist), into any pane and the editor (full), a shell
		// command in the session (full), Neovim's input (full); and
		// the attacker's terminal typing y and a.
		edit := st.pane("edit")
		other.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "y"})
		full.ok("pane_send_keys", map[string]any{"pane": edit, "keys": "y"})
		full.ok("pane_send_keys", map[string]any{"pane": shell, "keys": "{C-u}"})
		full.ok("pane_run", map[string]any{"pane": shell, "command": "tmux send-keys y; tmux send-keys Enter; true"})
		full.ok("nvim_lua", map[string]any{"code": "vim.api.nvim_input('y')"})
		attacker.press("y")
		attacker.press("a")
		r := <-res
		if r.code != errcode.ApprovalExpired || !strings.Contains(r.etext, "did not answer within 4s") {
			t.Fatalf("something in the session answered the approval: %v %q", r.err, r.etext)
		}
		if el := time.Since(start); el < 4*time.Second {
			t.Fatalf("refused after %s, before the timeout", el)
		}
		// Control: the attacker's terminal is a keyboard to tmux — it
		// answers a question asked in tmux, where approvals were asked.
		opt := "@stem_control_" + decision.NewID()[:8]
		in.Tmux(t, "command-prompt", "-b", "-1", "-p", "question", "set -gq "+opt+" %1")
		attacker.press("y")
		waitUntil(t, 10*time.Second, "the attacker's key answering a tmux prompt", func() bool {
			return strings.TrimSpace(in.Tmux(t, "show", "-gqv", opt)) == "y"
		})
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
				if e.Intent == 0 || (e.Event == audit.ApprovalDecision && e.Result != "refused" && !strings.Contains(e.Detail, "the student, at host terminal /dev/pts/test (stemctl attach)")) {
					t.Errorf("decision without its request or the host input that decided: %+v", e)
				}
				got = append(got, e.Result)
			}
		}
		if want := []string{"request", "refused", "request", "granted", "request", "denied", "request", "granted", "within", "request", "refused"}; !slices.Equal(got, want) {
			t.Fatalf("approval entries %v, want %v", got, want)
		}
	})
}

// Each server serving the instance is among the session's participants,
// on the host, while it runs: what the student's host line shows.
func TestParticipantsOnTheHost(t *testing.T) {
	in := fixture(t)
	sp, err := decision.Open(in.Dirs.State, in.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ps := sp.Participants(); len(ps) != 0 {
		t.Fatalf("participants before any client: %+v", ps)
	}
	s := connect(t, in, "assist")
	s.ok("pane_list", nil)
	ps := sp.Participants()
	if len(ps) != 1 || ps[0].Level != "assist" || !strings.Contains(ps[0].Who, "AI agent") {
		t.Fatalf("participants with one assist client: %+v", ps)
	}
	s.c.Close()
	waitUntil(t, 10*time.Second, "the ended session gone from the participants", func() bool { return len(sp.Participants()) == 0 })
}
