package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/termtext"
)

// Screen bounds of a tile: the bottom of a pane is what a teacher reads.
const (
	MaxLines = 60
	MaxCols  = 240
)

// paneRefresh: the active pane is listed again this often (the student
// switches windows rarely; a capture is often).
const paneRefresh = 2 * time.Second

// LiveOptions configure Live.
type LiveOptions struct {
	Every       time.Duration // between two looks at a student's screen (default 500ms)
	StatusEvery time.Duration // between two status probes (default 15s)
	Timeout     time.Duration // per call (default class.DefaultTimeout)
}

// Live puts what the class's open sessions see on the board: the status
// probe's task, state and flags, the active pane's screen with colours,
// the last session event. The sessions are the Source's (a class.Hub,
// which connects and reconnects); Live only asks over them.
type Live struct {
	students []string
	src      Source
	board    *Board
	opt      LiveOptions
}

// NewLive prepares the feed; Run starts it.
func NewLive(students []string, src Source, board *Board, opt LiveOptions) *Live {
	if opt.Every <= 0 {
		opt.Every = 500 * time.Millisecond
	}
	if opt.StatusEvery <= 0 {
		opt.StatusEvery = 15 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = class.DefaultTimeout
	}
	return &Live{students: students, src: src, board: board, opt: opt}
}

// Run feeds the board until ctx ends.
func (l *Live) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range l.students {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.keep(ctx, s)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.events(ctx)
	}()
	wg.Wait()
}

// keep looks at one student's screen every Every while their session is
// open, and asks for their status every StatusEvery. A student whose open
// session ended is gone: their tile says so at once (their last screen
// stays, no longer live) and no status is asked for until the hub has a
// session again, or their gate answers with no instance running (then
// their status says which is down); the other students' tiles are fed
// by their own loops.
func (l *Live) keep(ctx context.Context, student string) {
	var lastStatus time.Time
	var pane string
	var paneAt time.Time
	wasOpen, gone := false, false
	tick := time.NewTicker(l.opt.Every)
	defer tick.Stop()
	for {
		_, _, open := l.src.Grant(student)
		k, _ := l.link(student)
		// A student whose gate answers with no instance running is not
		// gone: their status says which instance is down.
		if open && gone || gone && k.NoInstance {
			gone, lastStatus, pane = false, time.Time{}, "" // back: everything anew
		}
		if !open && wasOpen && !k.NoInstance {
			gone = true
		}
		wasOpen = open
		if !gone && time.Since(lastStatus) >= l.opt.StatusEvery {
			l.probe(ctx, student)
			lastStatus = time.Now()
		}
		switch {
		case open:
			cctx, cancel := context.WithTimeout(ctx, l.opt.Timeout)
			if pane == "" || time.Since(paneAt) > paneRefresh {
				pane, paneAt = l.active(cctx, student), time.Now()
			}
			if pane != "" {
				if err := l.look(cctx, student, pane); err != nil {
					pane = "" // the pane may be gone: list again
				}
			}
			cancel()
		case gone:
			l.gone(student)
		default:
			why := "not connected yet"
			if k.Error != "" {
				why = k.Error
			}
			l.board.Update(student, func(t *Tile) { t.Error = oneLine(why) })
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// link is the hub's state of the student's session.
func (l *Live) link(student string) (class.Link, bool) {
	for _, k := range l.src.Links() {
		if k.Student == student {
			return k, true
		}
	}
	return class.Link{}, false
}

// goneNeed sorts a gone student with the unreachable ones.
var goneNeed = class.Row{Flags: []class.Flag{class.FlagGone}}.Need()

// gone marks the tile of a student whose session ended: since when, why
// (the hub's last error, from the student's side, cleaned), and when the
// hub tries again.
func (l *Live) gone(student string) {
	msg := "gone: the session ended"
	if k, ok := l.link(student); ok {
		if k.Since != nil {
			msg = "gone since " + k.Since.Local().Format("15:04:05")
		}
		if k.Error != "" {
			msg += ": " + k.Error
		}
		if k.Retry != nil {
			msg += "; next attempt at " + k.Retry.Local().Format("15:04:05")
		}
	}
	l.board.Update(student, func(t *Tile) {
		t.State, t.Pane, t.Error = "gone", "", oneLine(msg)
		t.Flags, t.Need = []string{string(class.FlagGone)}, goneNeed
	})
}

// probe asks for the student's status and puts it on the tile.
func (l *Live) probe(ctx context.Context, student string) {
	ctx, cancel := context.WithTimeout(ctx, l.opt.Timeout)
	defer cancel()
	row, err := l.src.StatusOf(ctx, student)
	if err != nil {
		l.board.Update(student, func(t *Tile) { t.Error = oneLine(err.Error()) })
		return
	}
	instance, state, card, task := "", string(row.Reach), "", ""
	for _, in := range row.Instances {
		if instance == "" || in.State == "answers" {
			state, task, card = in.State, in.Task, ""
			if in.Series != "" && in.Card != "" {
				card = in.Series + "/" + in.Card
			}
			if in.State == "answers" {
				instance = in.Instance
				break
			}
		}
	}
	flags := make([]string, len(row.Flags))
	for i, f := range row.Flags {
		flags[i] = string(f)
	}
	agents := agentLines(row)
	l.board.Update(student, func(t *Tile) {
		t.State, t.Card, t.Task, t.Flags, t.Need, t.Instance, t.Agents = state, card, task, flags, row.Need(), instance, agents
		if row.Reach != class.ReachOK {
			t.Error = oneLine(row.Why)
		}
	})
}

// active lists the panes and returns the active one ("" on failure, shown
// on the tile).
func (l *Live) active(ctx context.Context, student string) string {
	panes, err := listPanes(ctx, l.src, student)
	if err == nil {
		var p string
		if p, err = activePane(panes); err == nil {
			return p
		}
	}
	l.board.Update(student, func(t *Tile) { t.Error = oneLine(err.Error()) })
	return ""
}

// look captures the pane's screen.
func (l *Live) look(ctx context.Context, student, pane string) error {
	text, err := capture(ctx, l.src, student, pane)
	if err != nil {
		l.board.Update(student, func(t *Tile) { t.Error = oneLine(err.Error()) })
		return err
	}
	screen := Screen(text, MaxLines, MaxCols)
	l.board.Update(student, func(t *Tile) { t.Pane, t.Screen, t.Error = oneLine(pane), screen, "" })
	return nil
}

// events puts each student's last event on their tile.
func (l *Live) events(ctx context.Context) {
	var seq int64
	for ctx.Err() == nil {
		for _, e := range l.src.Since(ctx, seq, 30*time.Second) {
			seq = max(seq, e.Seq)
			line := eventLine(e)
			l.board.Update(e.Student, func(t *Tile) { t.Event = line })
		}
	}
}

func oneLine(s string) string { return termtext.Line(s, 200) }
