package approvals_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmd/approvals"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/xdg"
)

const inst = "native-amd64-demo-hello-t1"

func factory(state string, in io.Reader) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := iostreams.Test()
	if in != nil {
		ios.In = in
	}
	return &cmdutil.Factory{IOStreams: ios, Dirs: func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil }}, out, errOut
}

// asking puts one question to the student and returns the asker's result.
func asking(t *testing.T, state string, choices ...decision.Choice) (decision.Question, <-chan decision.Answer) {
	t.Helper()
	sp, err := decision.Open(state, inst)
	if err != nil {
		t.Fatal(err)
	}
	release, err := sp.Attend("the test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	q := decision.Question{ID: decision.NewID(), From: "agent codex", Text: "agent codex wants task_action {\"action\":\"test\"}", Choices: choices, Expires: time.Now().Add(time.Minute)}
	res := make(chan decision.Answer, 1)
	go func() {
		a, err := sp.Ask(context.Background(), q)
		if err != nil {
			t.Error(err)
		}
		res <- a
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for qs := range sp.Watch(ctx) {
		if len(qs) == 1 {
			return q, res
		}
	}
	t.Fatal("the question never showed")
	return q, nil
}

func run(t *testing.T, f *cmdutil.Factory, args ...string) error {
	t.Helper()
	cmd := approvals.NewCmdApprovals(f, nil)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetOut(io.Discard)
	return cmd.Execute()
}

func TestListAndAllow(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	q, res := asking(t, state, decision.Yes, decision.No, decision.While)
	f, out, _ := factory(state, nil)
	if err := run(t, f, "--json"); err != nil {
		t.Fatal(err)
	}
	var qs []decision.Question
	if err := json.Unmarshal(out.Bytes(), &qs); err != nil || len(qs) != 1 || qs[0].ID != q.ID {
		t.Fatalf("list: %v %s", err, out)
	}
	f, out, _ = factory(state, nil)
	if err := run(t, f, "allow", q.ID[:8], "--while"); err != nil {
		t.Fatal(err)
	}
	a := <-res
	if a.Choice != decision.While || a.Input != "stemctl approvals on no terminal" {
		t.Fatalf("answer %+v", a)
	}
	if !strings.Contains(out.String(), "allowed for 10 minutes") {
		t.Fatalf("output %q", out)
	}
	// Answered once: the id is gone.
	f, _, _ = factory(state, nil)
	if err := run(t, f, "deny", q.ID[:8]); err == nil || !strings.Contains(err.Error(), "waits for an answer") {
		t.Fatalf("second answer: %v", err)
	}
}

func TestWatchAsksTwiceForAWhile(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	q, res := asking(t, state, decision.Yes, decision.No, decision.While)
	in, w := io.Pipe()
	f, _, _ := factory(state, in)
	out := &syncBuffer{}
	f.IOStreams.Out = out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- approvals.Run(ctx, &approvals.Options{F: f, Verb: "watch", Instance: inst}) }()
	shown := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "agent codex wants task_action") < n {
			if time.Now().After(deadline) {
				t.Fatalf("the question was not shown %d time(s): %q", n, out.String())
			}
			time.Sleep(time.Millisecond) // polling a condition
		}
	}
	// "a" alone is not an answer; anything else goes back to the
	// question; "a" twice answers.
	shown(1)
	io.WriteString(w, "a\n")
	io.WriteString(w, "x\n")
	shown(2)
	io.WriteString(w, "a\n")
	io.WriteString(w, "a\n")
	a := <-res
	if a.ID != q.ID || a.Choice != decision.While || !strings.HasPrefix(a.Input, "stemctl approvals watch on ") {
		t.Fatalf("answer %+v", a)
	}
	cancel()
	w.Close()
	<-done
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
