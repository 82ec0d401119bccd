package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// Session events reach the model of each real CLI without anyone typing:
// the student's failing build, a crash in their shell and a stop of their
// gdb each appear, as a line marked [stem event], in the next request the
// CLI sends the scripted model, typed by the supervisor once the CLI was
// idle.
func TestEventsReachTheModel(t *testing.T) {
	t.Parallel() // an account and a model each; most of it is the delivery rules' quiet times
	for _, provider := range []string{"claude", "codex", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			b := newBoxAccount(t, modelserver.Say("stem-ready"), modelserver.Say("stem-ack-1"),
				modelserver.Say("stem-ack-2"), modelserver.Say("stem-ack-3"))
			rec := b.start(provider)
			st := b.status(nativeInst)
			b.prompt(st, rec, "hello")
			b.waitPane(st, rec.Pane, "stem-ready", 60*time.Second)
			s := b.mcp(nativeInst, "observe")
			s.call("session_events", nil) // attaches the session: events flow

			words := filepath.Join(st.Record.CardPath, "t1", "words.c")
			good, err := os.ReadFile(words)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(words, append(append([]byte{}, good...), "\nint broken( {\n"...), 0o644)
			shell := b.shellWindow(st)
			b.tmux(st, "select-window", "-t", rec.Window) // the student looks at the agent
			b.eventReaches(st, rec, s, "build_failed", runspec.EventPrefix+" build failed: exit 2", func() {
				b.tmux(st, "send-keys", "-t", shell, "make", "Enter")
			})
			os.WriteFile(words, good, 0o644)
			// The student has begun a question in the agent's window: the
			// crash waits until their input is empty again, and goes in
			// alone.
			half := "why does it crash"
			b.waitReady(st, rec)
			b.tmux(st, "send-keys", "-t", rec.Pane, "-l", half)
			b.waitPane(st, rec.Pane, half, 10*time.Second)
			var cleared time.Time
			b.eventReaches(st, rec, s, "program_crashed", runspec.EventPrefix+" program crashed: SIGSEGV exit 139", func() {
				b.tmux(st, "send-keys", "-t", shell, "sh -c 'kill -SEGV $$'", "Enter")
				b.waitLog(rec, "program_crashed")
				for range half {
					b.tmux(st, "send-keys", "-t", rec.Pane, "BSpace")
				}
				cleared = time.Now()
			})
			if req := b.lastPrompted(); req.Time.Before(cleared) || strings.Contains(req.Prompt, half) {
				t.Errorf("the event line went in at %s with the student's text (cleared at %s): %q", req.Time, cleared, req.Prompt)
			}

			b.must("build", nativeInst)
			var lay debugLayout
			b.mustJSON(&lay, "debug", nativeInst, "--no-build")
			b.waitPane(st, lay.GDBPane, "(gdb)", 30*time.Second)
			b.tmux(st, "send-keys", "-t", lay.GDBPane, "break count_words", "Enter")
			b.waitPane(st, lay.GDBPane, "Breakpoint 1 at", 10*time.Second)
			// The supervisor's event feed sees stops once its stem-mcp has
			// connected to the new bridge (it looks every 200 ms); the
			// test's client connects with its own gdb_status.
			b.waitLog(rec, "event feed: stem-mcp: connected to the gdb bridge")
			s.call("gdb_status", nil)
			b.tmux(st, "select-window", "-t", rec.Window)
			b.eventReaches(st, rec, s, "gdb_stopped", runspec.EventPrefix+" gdb stopped: breakpoint-hit in count_words at words.c:", func() {
				b.tmux(st, "send-keys", "-t", lay.GDBPane, "run", "Enter")
			})
			t.Logf("supervisor log:\n%s", readFile(rec.Log))
		})
	}
}

// eventReaches runs trigger, waits for the event at an MCP client of its
// own, then for the next request the CLI sends the model with its tools,
// which must carry want in its prompt; it logs the time from the event to
// that request.
func (b *boxAccount) eventReaches(st instanceInfo, rec agentstore.Record, s *mcpSession, typ, want string, trigger func()) time.Duration {
	b.t.Helper()
	before := b.ms.Requests()
	seen := len(before)
	asked := map[string]bool{} // prompts the model was sent before
	for _, r := range before {
		asked[r.Prompt] = true
	}
	s.drain()
	trigger()
	ev := s.next(30*time.Second, typ)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The next new request: a CLI that lost a response in transit (it
	// shows "API error · retrying") sends an earlier prompt again first.
	req, err := b.ms.Wait(ctx, func(r modelserver.Request) bool {
		return len(r.Tools) > 0 && b.ms.Index(r) >= seen && !asked[r.Prompt]
	})
	if err != nil {
		b.t.Fatalf("%s: no request to the model after %s: %v\nits window:\n%s\nsupervisor log:\n%s", rec.Provider, typ, err, b.capture(st, rec.Pane), readFile(rec.Log))
	}
	if !strings.Contains(req.Prompt, want) {
		b.t.Fatalf("%s: the request after %s has the prompt %q, want %q\nits window:\n%s\nsupervisor log:\n%s", rec.Provider, typ, req.Prompt, want, b.capture(st, rec.Pane), readFile(rec.Log))
	}
	b.last = req
	d := req.Time.Sub(ev.received)
	b.t.Logf("%s: %s -> in the model's request after %s", rec.Provider, typ, d.Round(time.Millisecond))
	return d
}

// lastPrompted is the request eventReaches found last.
func (b *boxAccount) lastPrompted() modelserver.Request { return b.last }

// waitLog waits until the agent's supervisor log has a line with want.
func (b *boxAccount) waitLog(rec agentstore.Record, want string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(readFile(rec.Log), want) {
		if time.Now().After(deadline) {
			b.t.Fatalf("the supervisor log never said %q:\n%s", want, readFile(rec.Log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
