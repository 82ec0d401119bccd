package tmux_test

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func TestWait(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	ctx := testCtx(t, 60*time.Second)
	pane := shellWindow(t, s, c)
	typeLine := func(line string) {
		t.Helper()
		if err := c.SendKeys(ctx, pane, []tmux.Key{{Text: line}, {Name: "Enter"}}); err != nil {
			t.Fatal(err)
		}
	}

	// A pattern that appears later. The echo splits the word so the
	// typed command line itself does not match.
	typeLine("sleep 0.3; echo REA''DY-1")
	start := time.Now()
	r, err := c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`READY-\d`), Timeout: 10 * time.Second})
	if err != nil || !r.Matched || r.Match != "READY-1" {
		t.Fatalf("Wait pattern = %+v, %v", r, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("matched after %v, before the text was printed", d)
	}

	// Already on the screen: returns at once.
	r, err = c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`READY-1`), Timeout: time.Second})
	if err != nil || !r.Matched || r.Elapsed > 500*time.Millisecond {
		t.Fatalf("Wait for present text = %+v, %v", r, err)
	}

	// Quiet: a tick every 0.1s for 0.5s, then silence. Quiet is six
	// intervals long, so it fires only after the last tick (unless the
	// machine stalls for that long, which would be a real quiet period).
	typeLine("for i in 1 2 3 4 5; do echo tick-$i; sleep 0.1; done")
	start = time.Now()
	r, err = c.Wait(ctx, pane, tmux.WaitOptions{Quiet: 600 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil || !r.Quiet {
		t.Fatalf("Wait quiet = %+v, %v", r, err)
	}
	if got, _ := c.Capture(ctx, pane, tmux.CaptureOptions{}); !strings.Contains(got.Text, "tick-5") {
		t.Errorf("quiet after %v while output was still coming: %q", time.Since(start), got.Text)
	}

	// Timeout.
	_, err = c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`never-printed`), Timeout: 200 * time.Millisecond})
	if !errors.Is(err, tmux.ErrTimeout) {
		t.Fatalf("Wait timeout: %v", err)
	}

	// A match that scrolled off the screen before Wait looked.
	typeLine("sleep 0.2; echo SCROLL''ED-AWAY; seq 1 100")
	r, err = c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`SCROLLED-AWAY`), Timeout: 10 * time.Second})
	if err != nil || !r.Matched {
		t.Fatalf("Wait for scrolled text = %+v, %v", r, err)
	}

	// Invalid options.
	if _, err := c.Wait(ctx, pane, tmux.WaitOptions{}); !errors.Is(err, tmux.ErrInvalidArgument) {
		t.Errorf("no pattern, no quiet: %v", err)
	}

	// The pane goes away during the wait.
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(`never`), Timeout: 20 * time.Second})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.KillPane(ctx, pane); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, tmux.ErrNoPane) {
			t.Errorf("Wait on killed pane: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not notice the pane was killed")
	}
}

// BenchmarkWaitNoticeLatency: how soon Wait returns after the pane output
// reaches the client (%output; the target is 20 ms). Measured against a subscriber that
// timestamps the notification carrying the token.
func BenchmarkWaitNoticeLatency(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	ctx := testCtx(b, 10*time.Minute)
	pane := programWindow(b, c, "", "cat")
	time.Sleep(200 * time.Millisecond)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		token := fmt.Sprintf("tok%04dx", i)
		sub, _ := c.Subscribe(pane, 1024)
		arrived := make(chan time.Time, 1)
		go func() {
			var seen string
			for n := range sub.C() {
				seen += string(n.Data)
				if strings.Contains(seen, token) {
					arrived <- time.Now()
					return
				}
			}
		}()
		go func() {
			time.Sleep(30 * time.Millisecond) // Wait is already waiting
			c.SendKeys(ctx, pane, []tmux.Key{{Text: token + "\n"}})
		}()
		r, err := c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(token), Timeout: 5 * time.Second})
		returned := time.Now()
		sub.Close()
		if err != nil || !r.Matched {
			b.Fatalf("Wait %d: %+v, %v", i, r, err)
		}
		select {
		case at := <-arrived:
			lat = append(lat, max(returned.Sub(at), 0))
		case <-time.After(time.Second):
			b.Fatalf("subscriber never saw %s", token)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	// The target is under 20 ms.
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
}

// BenchmarkWaitNotice measures the whole path: keys typed into `cat`,
// echoed, read by tmux, sent as %output, matched by Wait.
func BenchmarkWaitNotice(b *testing.B) {
	s := tmuxtest.Start(b)
	c := s.Dial(b)
	ctx := testCtx(b, 10*time.Minute)
	pane := programWindow(b, c, "", "cat")
	time.Sleep(200 * time.Millisecond)
	i := 0
	for b.Loop() {
		i++
		token := fmt.Sprintf("bench%06dx", i)
		go c.SendKeys(ctx, pane, []tmux.Key{{Text: token + "\n"}})
		if _, err := c.Wait(ctx, pane, tmux.WaitOptions{Pattern: regexp.MustCompile(token), Timeout: 5 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
}
