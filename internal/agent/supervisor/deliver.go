package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/cliscreen"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/tmux"
)

// deliverer types session events into the agent's input as short marked
// lines when the CLI is idle, and watches the agent's window for the CLI
// waiting on its user. It reads the window's text through the instance's
// tmux (the pane the relay runs in), the same screen the student sees.
//
// That text comes from a tmux server the container runs: the container
// can make it claim anything, but it can already type into the agent's
// window, so a forged screen gains it nothing it did not have.
type deliverer struct {
	h       *hub
	adapter string
	dir     string // the agent's directory (agent.json names the pane)
	sock    string // the instance's tmux socket
	lg      *log.Logger
	events  <-chan SessionEvent
	// waiting receives what the CLI waits for ("" when it no longer
	// does), for state.json and agent list.
	waiting chan string

	tc     *tmux.Client
	pane   tmux.PaneID
	window tmux.WindowID
	name   string // the window's name (the provider's)

	pending    pendingLine
	gate       gate
	lastShown  string    // the waiting state last reported
	lastScreen time.Time // when the screen was last read
	lastErr    string    // the last error reading it, logged once
	retryAt    time.Time // no new attempt to read it before this
}

// run delivers until ctx ends.
func (d *deliverer) run(ctx context.Context) {
	defer func() {
		if d.tc != nil {
			d.tc.Close()
		}
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-d.events:
			if !delivered(ev.Type) {
				continue
			}
			d.lg.Printf("event %d %s", ev.Seq, ev.Type)
			if strings.HasPrefix(ev.Type, "gdb_") {
				// A gdb stop during the agent's own turn is most likely
				// its own gdb tool's doing, whose result it has.
				if st, ok := d.screen(ctx); ok && st.Busy {
					d.lg.Printf("event %d %s during the agent's turn: not delivered", ev.Seq, ev.Type)
					continue
				}
			}
			d.pending.add(ev)
			d.try(ctx)
		case <-tick.C:
			d.try(ctx)
			d.watchWaiting(ctx)
		}
	}
}

// try types the pending line if every rule allows it now.
func (d *deliverer) try(ctx context.Context) {
	line := d.pending.line()
	if line == "" {
		return
	}
	now := time.Now()
	lastKey, lastOut := d.h.activity()
	if ok, _ := d.gate.open(now, lastKey); !ok || now.Sub(lastOut) < outputQuiet {
		return
	}
	st, ok := d.screen(ctx)
	if !ok || !st.Idle {
		return
	}
	if err := d.h.inject(ctx, line, func() bool { return d.idle(ctx) }, func() bool { return d.held(ctx, line) }); err != nil {
		d.lg.Printf("event line not typed: %v", err)
		return
	}
	waited := time.Since(d.pending.since)
	d.gate.sent(time.Now())
	d.lg.Printf("typed event line (event %d, waited %s): %s", d.pending.ev.Seq, waited.Round(time.Millisecond), line)
	d.pending.clear()
}

// idle reads the screen again and reports whether the CLI is idle.
func (d *deliverer) idle(ctx context.Context) bool {
	st, ok := d.screen(ctx)
	return ok && st.Idle
}

// held reports whether the agent's input still holds line after Enter:
// the window shows neither the empty input nor a running turn nor a
// question, and the line's start is on it.
func (d *deliverer) held(ctx context.Context, line string) bool {
	text, err := d.capture(ctx)
	if err != nil {
		return false
	}
	st := cliscreen.Classify(d.adapter, text)
	return !st.Idle && !st.Busy && st.Waiting == "" && strings.Contains(text, line[:min(len(line), 32)])
}

// watchWaiting reports a change of what the CLI waits for; the screen is
// read again only after the CLI wrote something and went quiet.
func (d *deliverer) watchWaiting(ctx context.Context) {
	_, lastOut := d.h.activity()
	if !lastOut.After(d.lastScreen) || time.Since(lastOut) < 500*time.Millisecond {
		return
	}
	st, ok := d.screen(ctx)
	if !ok || st.Waiting == d.lastShown {
		return
	}
	d.lastShown = st.Waiting
	if st.Waiting != "" {
		d.lg.Printf("the CLI waits for its user: %s (%s)", st.Waiting, termtext.Line(st.Asked, 120))
	} else {
		d.lg.Printf("the CLI no longer waits for its user")
	}
	// The window's name says it too: the student may be in another
	// window (or the agent started with --background).
	name := d.name
	if st.Waiting != "" {
		name += ": waits for you"
	}
	if d.tc != nil && d.window != "" {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := d.tc.RenameWindow(cctx, d.window, name); err != nil {
			d.lg.Printf("rename the agent's window: %v", err)
		}
		cancel()
	}
	// Only the newest state matters: an older one not yet read goes.
	select {
	case <-d.waiting:
	default:
	}
	d.waiting <- st.Waiting
}

// screen reads and classifies the agent's window.
func (d *deliverer) screen(ctx context.Context) (cliscreen.State, bool) {
	t := time.Now()
	if t.Before(d.retryAt) {
		return cliscreen.State{}, false
	}
	text, err := d.capture(ctx)
	if err != nil {
		if msg := err.Error(); msg != d.lastErr {
			d.lastErr = msg
			d.lg.Printf("read the agent's window: %v", err)
		}
		d.retryAt = time.Now().Add(time.Second)
		return cliscreen.State{}, false
	}
	d.lastScreen, d.lastErr = t, ""
	return cliscreen.Classify(d.adapter, text), true
}

func (d *deliverer) capture(ctx context.Context) (string, error) {
	if d.pane == "" {
		var rec agentstore.Record
		data, err := os.ReadFile(filepath.Join(d.dir, "agent.json"))
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(data, &rec); err != nil || rec.Pane == "" {
			return "", errors.New("no pane yet")
		}
		d.pane, d.window, d.name = tmux.PaneID(rec.Pane), tmux.WindowID(rec.Window), rec.Provider
	}
	if d.tc != nil {
		select {
		case <-d.tc.Done():
			d.tc.Close()
			d.tc = nil
		default:
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if d.tc == nil {
		tc, err := tmux.Dial(cctx, tmux.Options{Socket: d.sock, Session: "stem"})
		if err != nil {
			return "", err
		}
		d.tc = tc
	}
	res, err := d.tc.Capture(cctx, d.pane, tmux.CaptureOptions{MaxBytes: 64 << 10})
	if err != nil {
		return "", err
	}
	return res.Text, nil
}
