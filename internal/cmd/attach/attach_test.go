package attach

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/hostterm"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/xdg"
)

func TestFlagsAndHelp(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios}
	var got *Options
	cmd := NewCmdAttach(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"demo-t1", "--read-only"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Instance != "demo-t1" || !got.ReadOnly || got.Questions == nil {
		t.Fatalf("options %+v", got)
	}
	for _, s := range []string{"host line", "Ctrl-]", "OSC 52"} {
		if !strings.Contains(cmd.Long, s) {
			t.Errorf("--help does not mention %q", s)
		}
	}
}

// TestSpoolQuestions: the host line's questions are the spool's, its
// answers land in the spool naming the host input, and the terminal is
// present while attached.
func TestSpoolQuestions(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Dirs: func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil }}
	const input = "host terminal /dev/pts/9 (stemctl attach)"
	qs, release, err := spoolQuestions(f)("demo-t1", input)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := decision.Open(state, "demo-t1")
	if err != nil {
		t.Fatal(err)
	}
	if p := sp.Present(); len(p) != 1 || p[0].Input != input {
		t.Fatalf("present %+v", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := decision.Question{ID: decision.NewID(), From: "agent codex", Text: "run?", Choices: []decision.Choice{decision.Yes, decision.No}, Expires: time.Now().Add(time.Hour)}
	res := make(chan decision.Answer, 1)
	go func() { a, _ := sp.Ask(ctx, q); res <- a }()
	var shown hostterm.Question
	for list := range qs.Watch(ctx) {
		if len(list) == 1 {
			shown = list[0]
			break
		}
	}
	if shown.ID != q.ID || shown.From != "agent codex" || len(shown.Choices) != 2 {
		t.Fatalf("shown %+v", shown)
	}
	if err := qs.Answer(q.ID, hostterm.While); err == nil {
		t.Fatal("a choice the question does not offer was accepted")
	}
	if err := qs.Answer(q.ID, hostterm.Yes); err != nil {
		t.Fatal(err)
	}
	if a := <-res; a.Choice != decision.Yes || a.Input != input {
		t.Fatalf("answer %+v", a)
	}
	release()
	if p := sp.Present(); len(p) != 0 {
		t.Fatalf("still present after release: %+v", p)
	}
}
