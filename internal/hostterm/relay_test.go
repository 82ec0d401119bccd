package hostterm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// fakeQuestions is a spool in memory: answers are recorded, the pending
// list is what the test sets.
type fakeQuestions struct {
	mu      sync.Mutex
	ch      chan []Question
	answers []string
	gone    map[string]bool
}

func newFake() *fakeQuestions {
	return &fakeQuestions{ch: make(chan []Question), gone: map[string]bool{}}
}

func (f *fakeQuestions) Watch(ctx context.Context) <-chan []Question { return f.ch }

func (f *fakeQuestions) Answer(id string, c Choice) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[id] {
		return errors.New("no such open question")
	}
	f.gone[id] = true
	f.answers = append(f.answers, id+"="+string(c))
	return nil
}

func (f *fakeQuestions) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.answers...)
}

var q1 = Question{ID: "q1", From: "agent codex", Text: "run test?", Choices: []Choice{Yes, No, While}}

// newTestRelay is a relay on a 24x40 terminal with the host line, whose
// stream has started.
func newTestRelay(t *testing.T, qs Questions) (*Relay, *bytes.Buffer) {
	t.Helper()
	var term bytes.Buffer
	r := New(&term, Options{Line: true, Name: "demo-t1", Questions: qs})
	sizes := make(chan engine.TermSize, 1)
	sizes <- engine.TermSize{Rows: 24, Cols: 40}
	close(sizes)
	out := r.Sizes(sizes)
	if s := <-out; s != (engine.TermSize{Rows: 23, Cols: 40}) {
		t.Fatalf("the client got %v, want 23x40", s)
	}
	r.Output().Write([]byte("x"))
	return r, &term
}

func TestLineBytes(t *testing.T) {
	t.Parallel()
	got := string(lineBytes("stem ▸ demo", 24, 16))
	want := "\x1b7\x1b[?6l\x1b(B\x0f\x1b[0;7m\x1b[24;1Hstem ▸ demo    \x1b[0m\x1b[K\x1b8"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := string(lineBytes("漢字漢字", 3, 6)); got != "\x1b7\x1b[?6l\x1b(B\x0f\x1b[0;7m\x1b[3;1H漢字 \x1b[0m\x1b[K\x1b8" {
		t.Fatalf("wide runes: %q", got)
	}
}

// TestOutputDrawsLineAfterEachWrite: the stream's bytes, guarded, then the
// host line, in one write; never inside a sequence the stream has begun.
func TestOutputDrawsLineAfterEachWrite(t *testing.T) {
	t.Parallel()
	r, term := newTestRelay(t, nil)
	line := string(lineBytes("stem ▸ demo-t1", 24, 40))
	if term.String() != "x"+line {
		t.Fatalf("first write: %q", term.String())
	}
	term.Reset()
	r.Output().Write([]byte("\x1b]52;c;eA==\x07a\x1b[3"))
	if term.String() != "a" {
		t.Fatalf("inside a cut CSI: %q (want the text alone, no line)", term.String())
	}
	term.Reset()
	r.Output().Write([]byte("1mb\x1b7c"))
	if term.String() != "\x1b[31mb\x1b7c" {
		t.Fatalf("while the stream holds the saved cursor: %q", term.String())
	}
	term.Reset()
	r.Output().Write([]byte("\x1b8"))
	if term.String() != "\x1b8"+line {
		t.Fatalf("after the restore: %q", term.String())
	}
}

func TestNoLineGuardsOnly(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	r := New(&term, Options{Name: "demo-t1", Questions: newFake()})
	r.Output().Write([]byte("a\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\b"))
	if term.String() != "ab" {
		t.Fatalf("got %q", term.String())
	}
	in := bytes.NewReader([]byte{chordKey})
	if r.Input(in) != in {
		t.Fatal("without the line, input must pass untouched")
	}
}

func pend(t *testing.T, r *Relay, qs ...Question) {
	t.Helper()
	r.mu.Lock()
	r.setPending(qs)
	r.mu.Unlock()
}

func TestChord(t *testing.T) {
	t.Parallel()
	type step struct {
		in, forward string
	}
	cases := []struct {
		name    string
		steps   []step
		answers []string
	}{
		{"yes", []step{{"\x1d", ""}, {"y", ""}}, []string{"q1=yes"}},
		{"no", []step{{"\x1d", ""}, {"n", ""}}, []string{"q1=no"}},
		{"while confirmed", []step{{"\x1d", ""}, {"a", ""}, {"y", ""}}, []string{"q1=while"}},
		{"while cancelled", []step{{"\x1d", ""}, {"a", ""}, {"\x1b", ""}, {"y", "y"}}, nil},
		{"esc cancels", []step{{"\x1d", ""}, {"\x1b", ""}, {"y", "y"}}, nil},
		{"typing answers nothing", []step{{"a", "a"}, {"n", "n"}, {"d", "d"}, {" ", " "}, {"y", "y"}}, nil},
		{"chord with other bytes", []step{{"\x1dy", "\x1dy"}, {"y", "y"}}, nil},
		{"answer key with other bytes", []step{{"\x1d", ""}, {"yy", "yy"}, {"y", "y"}}, nil},
		{"chord in a paste", []step{{"\x1b[200~", "\x1b[200~"}, {"\x1d", "\x1d"}, {"y", "y"}, {"\x1b[201~", "\x1b[201~"}}, nil},
		{"chord after a paste", []step{{"\x1b[200~ab\x1b[201~", "\x1b[200~ab\x1b[201~"}, {"\x1d", ""}, {"y", ""}}, []string{"q1=yes"}},
		{"paste marker split", []step{{"\x1b[20", "\x1b[20"}, {"0~", "0~"}, {"\x1d", "\x1d"}, {"y", "y"}}, nil},
		{"other key cancels and passes", []step{{"\x1d", ""}, {"x", "x"}, {"y", "y"}}, nil},
		{"arrow cancels and passes", []step{{"\x1d", ""}, {"\x1b[A", "\x1b[A"}, {"y", "y"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			r, _ := newTestRelay(t, f)
			pend(t, r, q1)
			for _, s := range c.steps {
				if got := string(r.key([]byte(s.in))); got != s.forward {
					t.Fatalf("key %q forwarded %q, want %q", s.in, got, s.forward)
				}
			}
			if got := f.got(); len(got) != len(c.answers) || len(got) > 0 && got[0] != c.answers[0] {
				t.Fatalf("answers %v, want %v", got, c.answers)
			}
		})
	}
}

func TestChordWithoutQuestionPasses(t *testing.T) {
	t.Parallel()
	f := newFake()
	r, _ := newTestRelay(t, f)
	for _, k := range []string{"\x1d", "y"} {
		if got := string(r.key([]byte(k))); got != k {
			t.Fatalf("no question pending: %q forwarded as %q", k, got)
		}
	}
	if len(f.got()) != 0 {
		t.Fatalf("answered %v with no question", f.got())
	}
}

// TestChordAnswersTheShownQuestion: the chord answers the question shown
// when it was armed; one withdrawn meanwhile is not answered by the key.
func TestChordAnswersTheShownQuestion(t *testing.T) {
	t.Parallel()
	f := newFake()
	r, term := newTestRelay(t, f)
	q2 := Question{ID: "q2", From: "agent claude", Text: "deploy?", Choices: []Choice{Yes, No}}
	pend(t, r, q1, q2)
	r.key([]byte{chordKey})
	pend(t, r, q2)
	if got := string(r.key([]byte("y"))); got != "y" {
		t.Fatalf("after the armed question went away, y forwarded %q", got)
	}
	if len(f.got()) != 0 {
		t.Fatalf("answered %v", f.got())
	}
	if !bytes.Contains(term.Bytes(), []byte("the question was withdrawn")) {
		t.Fatalf("the line did not say the question went: %q", term.String())
	}
	// While is not offered by q2: a is passed on.
	r.key([]byte{chordKey})
	if got := string(r.key([]byte("a"))); got != "a" {
		t.Fatalf("a for a question without While forwarded %q", got)
	}
	r.key([]byte{chordKey})
	r.key([]byte("n"))
	if got := f.got(); len(got) != 1 || got[0] != "q2=no" {
		t.Fatalf("answers %v, want [q2=no]", got)
	}
}

func TestLineShowsQuestion(t *testing.T) {
	t.Parallel()
	f := newFake()
	r, term := newTestRelay(t, f)
	term.Reset()
	pend(t, r, q1)
	want := string(lineBytes("stem ▸ agent codex: run test?  [Ctrl-] then y yes · n no · a allow all 10 min]", 24, 40))
	if term.String() != want {
		t.Fatalf("got %q\nwant %q", term.String(), want)
	}
	term.Reset()
	r.key([]byte{chordKey})
	r.key([]byte("a"))
	if !bytes.Contains(term.Bytes(), []byte("allow everything agent")) {
		t.Fatalf("no confirmation asked: %q", term.String())
	}
}

// TestNoLineAfterTheAltScreen: once tmux leaves the alternate screen (it
// detaches), the line is not drawn on the shell's screen.
func TestNoLineAfterTheAltScreen(t *testing.T) {
	t.Parallel()
	r, term := newTestRelay(t, nil)
	line := string(lineBytes("stem ▸ demo-t1", 24, 40))
	term.Reset()
	r.Output().Write([]byte("\x1b[?1049h"))
	if term.String() != "\x1b[?1049h"+line {
		t.Fatalf("on the alternate screen: %q", term.String())
	}
	term.Reset()
	r.Output().Write([]byte("\x1b[?1049l[detached]\r\n"))
	if term.String() != "\x1b[?1049l[detached]\r\n" {
		t.Fatalf("after leaving it: %q", term.String())
	}
	term.Reset()
	r.Output().Write([]byte("\x1b[?1049h"))
	if term.String() != "\x1b[?1049h"+line {
		t.Fatalf("back on it: %q", term.String())
	}
}

// TestLineShowsWhoIsConnected: with no question pending, the line names
// who is connected, and follows when that changes.
func TestLineShowsWhoIsConnected(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	with := []string{"agent 3f9a2c (assist)"}
	var term syncBuf
	r := New(&term, Options{Line: true, Name: "demo-t1", Participants: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), with...)
	}})
	sizes := make(chan engine.TermSize, 1)
	sizes <- engine.TermSize{Rows: 24, Cols: 80}
	close(sizes)
	<-r.Sizes(sizes)
	r.Output().Write([]byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	shows := func(text string) {
		t.Helper()
		want := string(lineBytes(text, 24, 80))
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(term.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the line never showed %q: %q", text, term.String())
			}
			time.Sleep(time.Millisecond) // polling a condition
		}
	}
	shows("stem ▸ demo-t1 · connected: agent 3f9a2c (assist)")
	mu.Lock()
	with = nil
	mu.Unlock()
	shows("stem ▸ demo-t1 · no agent or teacher connected")
}

// TestQuestionKeepsWhoIsConnected: a question takes the line, and who is
// connected stays on it after the keys to answer, so a stream of
// questions never hides who is watching.
func TestQuestionKeepsWhoIsConnected(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	r := New(&term, Options{Line: true, Name: "demo-t1", Questions: newFake(), Participants: func() []string { return nil }})
	sizes := make(chan engine.TermSize, 1)
	sizes <- engine.TermSize{Rows: 24, Cols: 200}
	close(sizes)
	<-r.Sizes(sizes)
	r.Output().Write([]byte("x"))
	r.mu.Lock()
	r.with = []string{"agent codex (assist)", "teacher kowalska (observe)"}
	r.mu.Unlock()
	term.Reset()
	pend(t, r, q1)
	want := string(lineBytes("stem ▸ agent codex: run test?  [Ctrl-] then y yes · n no · a allow all 10 min] · connected: agent codex (assist), teacher kowalska (observe)", 24, 200))
	if term.String() != want {
		t.Fatalf("got %q\nwant %q", term.String(), want)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWelcomeOnTheLine: a newcomer's note ends the host line once tmux
// has the terminal, gives way to a question for good, and leaves after
// its time.
func TestWelcomeOnTheLine(t *testing.T) {
	t.Parallel()
	var term syncBuf
	r := New(&term, Options{Line: true, Name: "demo-t1", Questions: newFake(), Welcome: "detach: C-b d", WelcomeFor: time.Hour})
	sizes := make(chan engine.TermSize, 1)
	sizes <- engine.TermSize{Rows: 24, Cols: 80}
	close(sizes)
	<-r.Sizes(sizes)
	r.Output().Write([]byte("x"))
	if want := string(lineBytes("stem ▸ demo-t1 · detach: C-b d", 24, 80)); !strings.Contains(term.String(), want) {
		t.Fatalf("no welcome on the line: %q", term.String())
	}
	r.mu.Lock()
	r.setPending([]Question{q1})
	r.setPending(nil)
	r.mu.Unlock()
	if want := string(lineBytes("stem ▸ demo-t1", 24, 80)); !strings.HasSuffix(term.String(), want) {
		t.Fatalf("the welcome came back after a question: %q", term.String())
	}

	var term2 syncBuf
	r2 := New(&term2, Options{Line: true, Name: "demo-t1", Welcome: "detach: C-b d", WelcomeFor: time.Millisecond})
	sizes2 := make(chan engine.TermSize, 1)
	sizes2 <- engine.TermSize{Rows: 24, Cols: 80}
	close(sizes2)
	<-r2.Sizes(sizes2)
	r2.Output().Write([]byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r2.Run(ctx)
	want := string(lineBytes("stem ▸ demo-t1", 24, 80))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(term2.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the welcome never left: %q", term2.String())
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}
