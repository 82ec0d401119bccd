package dashboard

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// LiveOptions configure Live.
type LiveOptions struct {
	class.Options               // Resolve, SSH, Timeout (per call)
	Every         time.Duration // between two looks at a student's screen (default 500ms)
	StatusEvery   time.Duration // between two status probes while connected (default 15s)
	MinBackoff    time.Duration // after a failed session (default 1s), doubling
	MaxBackoff    time.Duration // (default 30s)
}

// Live keeps one MCP session open with each student's gate and puts what
// it sees on the board: the status probe's task, state and flags, the
// active pane's screen with colours, the last session event.
type Live struct {
	students []class.Student
	board    *Board
	opt      LiveOptions
}

// NewLive prepares the feed; Run starts it.
func NewLive(students []class.Student, board *Board, opt LiveOptions) *Live {
	if opt.Every <= 0 {
		opt.Every = 500 * time.Millisecond
	}
	if opt.StatusEvery <= 0 {
		opt.StatusEvery = 15 * time.Second
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = time.Second
	}
	if opt.MaxBackoff < opt.MinBackoff {
		opt.MaxBackoff = max(30*time.Second, opt.MinBackoff)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = class.DefaultTimeout
	}
	return &Live{students: students, board: board, opt: opt}
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
	wg.Wait()
}

// keep opens the student's session again and again, with backoff.
func (l *Live) keep(ctx context.Context, s class.Student) {
	backoff := l.opt.MinBackoff
	for ctx.Err() == nil {
		start := time.Now()
		err := l.session(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > l.opt.MaxBackoff {
			backoff = l.opt.MinBackoff
		}
		l.board.Update(s.Name, func(t *Tile) { t.Error = oneLine(err.Error()) })
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, l.opt.MaxBackoff)
	}
}

// probe asks the student's gate for its status and puts it on the tile;
// it returns the instance that answers ("" if none).
func (l *Live) probe(ctx context.Context, s class.Student) (string, error) {
	row := class.Status(ctx, []class.Student{s}, l.opt.Options)[0]
	instance, state, task := "", string(row.Reach), ""
	for _, in := range row.Instances {
		if instance == "" || in.State == "answers" {
			state, task = in.State, in.Task
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
	l.board.Update(s.Name, func(t *Tile) {
		t.State, t.Task, t.Flags, t.Need, t.Instance = state, task, flags, row.Need(), instance
		if row.Reach != class.ReachOK {
			t.Error = oneLine(row.Why)
		}
	})
	switch {
	case row.Reach != class.ReachOK:
		return "", fmt.Errorf("%s: %s", row.Reach, row.Why)
	case instance == "":
		return "", errors.New("no instance of this student answers (none started, or tmux and Neovim are down)")
	}
	return instance, nil
}

// session runs one MCP session: it looks at the active pane every Every
// and asks for new events, until a call fails.
func (l *Live) session(ctx context.Context, s class.Student) error {
	instance, err := l.probe(ctx, s)
	if err != nil {
		return err
	}
	tg, _, err := l.opt.Resolve(ctx, s)
	if err != nil {
		return err
	}
	args, err := tg.Command("mcp", instance)
	if err != nil {
		return err
	}
	ssh := l.opt.SSH
	if ssh == "" {
		ssh = "ssh"
	}
	sess, err := dial(ctx, ssh, args, l.opt.Timeout)
	if err != nil {
		return err
	}
	defer sess.close()
	l.board.Update(s.Name, func(t *Tile) { t.Error = "" })
	var since int64
	lastStatus := time.Now()
	tick := time.NewTicker(l.opt.Every)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, l.opt.Timeout)
		err := l.look(cctx, s.Name, sess, &since)
		cancel()
		if err != nil {
			return err
		}
		if time.Since(lastStatus) > l.opt.StatusEvery {
			if _, err := l.probe(ctx, s); err != nil {
				return err
			}
			lastStatus = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// look captures the active pane's screen and takes the new events.
func (l *Live) look(ctx context.Context, student string, sess *session, since *int64) error {
	pane, err := sess.activePane(ctx)
	if err != nil {
		return err
	}
	text, err := sess.capture(ctx, pane)
	if err != nil {
		return err
	}
	evs, err := sess.events(ctx, *since)
	if err != nil {
		return err
	}
	screen := Screen(text, MaxLines, MaxCols)
	var last string
	for _, ev := range evs {
		if ev.Seq > *since {
			*since = ev.Seq
			last = ev.line()
		}
	}
	l.board.Update(student, func(t *Tile) {
		t.Pane, t.Screen = oneLine(pane), screen
		if last != "" {
			t.Event = last
		}
	})
	return nil
}

func oneLine(s string) string { return termtext.Line(s, 200) }

// line is an event as the tile's last line says it.
func (e event) line() string {
	parts := []string{e.Time.Local().Format("15:04:05"), e.Type}
	for _, p := range []string{e.Pane, e.Role, e.Action, e.Signal} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if e.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit %d", *e.ExitCode))
	}
	return oneLine(strings.Join(parts, " "))
}
