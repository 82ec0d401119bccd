package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/decision"
)

// asked is a question put to the student through the instance's host
// spool by a process of the account's user, as stem-mcp puts an approval.
type asked struct {
	id   string
	done chan struct{}
	a    decision.Answer
	err  error
}

func ask(ctx context.Context, t *testing.T, a *account, inst, text string) *asked {
	t.Helper()
	as := &asked{id: decision.NewID(), done: make(chan struct{})}
	cmd := a.Command(ctx, a.asker(t), inst, as.id, text)
	cmd.Env = append(cmd.Env, askEnv+"="+filepath.Join(a.Base, "state"))
	go func() {
		defer close(as.done)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			as.err = fmt.Errorf("%v: %s", err, stderr.String())
			return
		}
		as.err = json.Unmarshal(out, &as.a)
	}()
	return as
}

func (as *asked) pending(t *testing.T, sp *decision.Spool) bool {
	t.Helper()
	qs, err := sp.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(qs, func(q decision.Question) bool { return q.ID == as.id })
}

// TestAttachHostLineAnswers runs the real `stemctl attach` on a pty against
// a real instance, with questions asked through the host spool:
//   - the student's path: the chord answers yes, no, and (confirmed) while,
//     and the answer names the host terminal;
//   - text typed while a question is pending ("and so") goes to the
//     container and answers nothing;
//   - a tmux client of the container's own, and send-keys from inside the
//     container, type Ctrl-], y and a while the question is pending: their
//     keys reach the container's tmux (the control) and answer nothing.
//
// It runs as root with root's Podman and as a non-root student with
// rootless Podman (the asker, stemctl and the container's commands as
// that student).
func TestAttachHostLineAnswers(t *testing.T) {
	for _, mode := range podmanModes {
		t.Run(mode, func(t *testing.T) { hostLineFlow(t, modeAccount(t, mode)) })
	}
}

func hostLineFlow(t *testing.T, a *account) {
	inst, sock, cid := attachedInstance(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A window whose program shows the keys it gets: what reaches the
	// container is on screen.
	a.tmuxOut(sock, "new-window", "-n", "cat", "cat")
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), "attach", inst)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 160, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait(); f.Close() }()
	screen := record(f)
	waitFor(t, 20*time.Second, "stemctl's client attached", func() bool { return a.clientCount(sock) == 1 })
	// The spool is stemctl's (the student's): opened here only once it
	// exists, so the test makes nothing in it.
	spDir := filepath.Join(a.Base, "state", "decisions", inst)
	waitFor(t, 20*time.Second, "stemctl made the spool", func() bool { _, err := os.Stat(spDir); return err == nil })
	if fi, err := os.Stat(spDir); err != nil || (a.Cred != nil && fi.Sys().(*syscall.Stat_t).Uid != a.Cred.Uid) {
		t.Fatalf("the spool %s is not the student's: %v", spDir, err)
	}
	sp, err := decision.Open(filepath.Join(a.Base, "state"), inst)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "stemctl present on the spool", func() bool { return len(sp.Present()) == 1 })
	if in := sp.Present()[0].Input; !strings.HasPrefix(in, "host terminal /dev/pts/") || !strings.HasSuffix(in, " (stemctl attach)") {
		t.Fatalf("present as %q, want the host terminal", in)
	}
	key := func(b string) {
		t.Helper()
		if _, err := f.Write([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	capture := func() string { return a.tmuxOut(sock, "capture-pane", "-p", "-t", "stem:cat") }

	t.Run("typing answers nothing", func(t *testing.T) {
		as := ask(ctx, t, a, inst, "run the tests (typing)")
		waitFor(t, 20*time.Second, "the host line shows the question", screen.shows("agent codex: run the tests (typing)"))
		typed := ""
		for _, k := range []string{"a", "n", "d", " ", "s", "o", "y"} {
			key(k)
			typed += k
			want := strings.TrimRight(typed, " ")
			waitFor(t, 20*time.Second, "the key reached the container", func() bool { return strings.Contains(capture(), want) })
		}
		if !as.pending(t, sp) {
			t.Fatalf("typing answered the question: %+v %v", as.a, as.err)
		}
		m := screen.mark()
		key("\x1d")
		waitFor(t, 20*time.Second, "the chord armed", screen.showsAfter(m, "answer agent codex"))
		key("n")
		<-as.done
		if as.err != nil || as.a.Choice != decision.No {
			t.Fatalf("chord n: %+v %v", as.a, as.err)
		}
	})

	for _, c := range []struct {
		name string
		keys []string
		want decision.Choice
	}{
		{"yes", []string{"\x1d", "y"}, decision.Yes},
		{"no", []string{"\x1d", "n"}, decision.No},
		{"while", []string{"\x1d", "a", "y"}, decision.While},
	} {
		t.Run("chord "+c.name, func(t *testing.T) {
			text := "run the tests (" + c.name + ")"
			as := ask(ctx, t, a, inst, text)
			waitFor(t, 20*time.Second, "the host line shows the question", screen.shows("agent codex: "+text))
			for i, k := range c.keys {
				m := screen.mark()
				key(k)
				if i < len(c.keys)-1 {
					next := map[string]string{"\x1d": "answer agent codex", "a": "allow everything agent codex"}[k]
					waitFor(t, 20*time.Second, "the host line's next step", screen.showsAfter(m, next))
				}
			}
			start := time.Now()
			<-as.done
			t.Logf("last key to answer recorded: %v", time.Since(start))
			if as.err != nil || as.a.Choice != c.want {
				t.Fatalf("got %+v %v, want %s", as.a, as.err, c.want)
			}
			if !strings.HasPrefix(as.a.Input, "host terminal /dev/pts/") {
				t.Fatalf("answer input %q", as.a.Input)
			}
		})
	}

	t.Run("the container's own keys answer nothing", func(t *testing.T) {
		as := ask(ctx, t, a, inst, "run the tests (forged)")
		waitFor(t, 20*time.Second, "the host line shows the question", screen.shows("agent codex: run the tests (forged)"))
		// A client of the container's own, at a terminal.
		evil := a.host(ctx, "podman", "exec", "-it", "-e", "TERM=xterm-256color", cid, "tmux", "-S", sock, "attach-session", "-t", "stem")
		ef, err := pty.StartWithSize(evil, &pty.Winsize{Cols: 160, Rows: 30})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { evil.Process.Kill(); evil.Wait(); ef.Close() }()
		record(ef)
		waitFor(t, 20*time.Second, "the container's client attached", func() bool { return a.clientCount(sock) == 2 })
		for _, k := range []string{"\x1d", "y", "\x1d", "a", "y", "Q"} {
			ef.Write([]byte(k)) // each key its own write, as a person types
		}
		// send-keys from inside the container.
		for _, k := range []string{"C-]", "y", "C-]", "a", "y", "Z"} {
			if out, err := a.host(ctx, "podman", "exec", cid, "tmux", "-S", sock, "send-keys", "-t", "stem:cat", k).CombinedOutput(); err != nil {
				t.Fatalf("send-keys %s: %v %s", k, err, out)
			}
		}
		// The control: the keys reached the container's tmux and its pane.
		waitFor(t, 20*time.Second, "the container's keys reached the pane", func() bool { return strings.Contains(capture(), "ayQ") && strings.Contains(capture(), "ayZ") })
		if !as.pending(t, sp) {
			<-as.done
			t.Fatalf("the container's keys answered: %+v %v", as.a, as.err)
		}
		select {
		case <-as.done:
			t.Fatalf("the question ended without the student: %+v %v", as.a, as.err)
		default:
		}
		m := screen.mark()
		key("\x1d")
		waitFor(t, 20*time.Second, "the chord armed", screen.showsAfter(m, "answer agent codex"))
		key("n")
		<-as.done
		if as.err != nil || as.a.Choice != decision.No || !strings.HasPrefix(as.a.Input, "host terminal /dev/pts/") {
			t.Fatalf("the student's no: %+v %v", as.a, as.err)
		}
	})
}

// mark is how much the screen has shown so far.
func (s *screen) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// showsAfter is a waitFor condition: the screen shows text after mark.
func (s *screen) showsAfter(mark int, text string) func() bool {
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return strings.Contains(s.buf.String()[mark:], text)
	}
}
