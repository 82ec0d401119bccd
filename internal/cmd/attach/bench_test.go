package attach

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/hostterm"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/xdg"
)

// chunks is a terminal whose every read is one key.
type chunks chan []byte

func (c chunks) Read(p []byte) (int, error) { return copy(p, <-c), nil }

// BenchmarkDecisionRoundTrip: a question is on the host line; the
// student's chord (Ctrl-] then y) goes through the relay's input and the
// spool until the asker has the answer. The student's reaction is not in
// it: the clock starts when the question is shown.
func BenchmarkDecisionRoundTrip(b *testing.B) {
	state := b.TempDir()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Dirs: func() (xdg.Dirs, error) { return xdg.Dirs{State: state}, nil }}
	qs, release, err := spoolQuestions(f)("demo-t1", "host terminal /dev/pts/9 (stemctl attach)")
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	sp, _ := decision.Open(state, "demo-t1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := hostterm.New(io.Discard, hostterm.Options{Line: true, Name: "demo-t1", Questions: qs})
	go r.Run(ctx)
	keys := make(chunks)
	in := r.Input(keys)
	go io.Copy(io.Discard, in)
	var total time.Duration
	for b.Loop() {
		q := decision.Question{ID: decision.NewID(), From: "agent codex", Text: "run?", Choices: []decision.Choice{decision.Yes, decision.No}, Expires: time.Now().Add(time.Hour)}
		done := make(chan decision.Answer, 1)
		go func() { a, _ := sp.Ask(ctx, q); done <- a }()
		for !shown(r, q.ID) {
			time.Sleep(100 * time.Microsecond)
		}
		start := time.Now()
		keys <- []byte{0x1d}
		keys <- []byte("y")
		if a := <-done; a.Choice != decision.Yes {
			b.Fatalf("answer %+v", a)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "roundtrip-ms")
}

func shown(r *hostterm.Relay, id string) bool {
	for _, q := range r.Pending() {
		if q.ID == id {
			return true
		}
	}
	return false
}
