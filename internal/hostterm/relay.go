package hostterm

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// Relay sits between the student's real terminal and the container's tmux
// client. Output is guarded; with a host line (Options.Line) the client
// gets one row less than the terminal and the relay draws its own line on
// the last row, and input passes through the chord logic (keys.go).
type Relay struct {
	mu    sync.Mutex
	term  io.Writer
	guard *Guard
	buf   []byte
	qs    Questions
	line  bool
	name  string
	who   func() []string
	with  []string // who is connected, as last read

	rows, cols int
	started    bool   // the stream has written: the terminal is tmux's now
	drawn      []byte // the line as last drawn (nil: draw again)

	pending    []Question
	state      keyState
	armed      Question
	note       string
	inPaste    bool
	welcome    string
	welcomeFor time.Duration
	tail       []byte // the end of the last input read, for split paste markers
}

// Options configure a Relay.
type Options struct {
	// Line reserves the last row for the host line and reads the answer
	// chord from the input. Without it (not a terminal) the relay only
	// guards the output.
	Line bool
	// Name is the instance, shown when no question is pending.
	Name string
	// Questions feed the host line; nil shows none.
	Questions Questions
	// Participants says who is connected to the session now (each a
	// short name with its level), shown when no question is pending;
	// nil shows nothing.
	Participants func() []string
	// Welcome ends the line at first (a newcomer's keys), for
	// WelcomeFor (default 30 s) or until a question needs the room: the
	// terminal is tmux's once it starts, so text printed before is never
	// seen.
	Welcome    string
	WelcomeFor time.Duration
}

// participantsEvery is how often the host line reads who is connected.
const participantsEvery = time.Second

// New returns a relay writing to term.
func New(term io.Writer, opts Options) *Relay {
	return &Relay{term: term, guard: NewGuard(io.Discard), qs: opts.Questions, line: opts.Line, name: opts.Name, who: opts.Participants,
		welcome: opts.Welcome, welcomeFor: opts.WelcomeFor}
}

// Output is the writer for the container's output.
func (r *Relay) Output() io.Writer { return outputWriter{r} }

type outputWriter struct{ r *Relay }

// Write guards p and, between whole sequences, draws the host line
// again: whatever the stream wrote on the last row is overwritten in the
// same write to the terminal.
func (o outputWriter) Write(p []byte) (int, error) {
	r := o.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
	r.buf = r.guard.Filter(r.buf[:0], p)
	r.buf = r.appendLine(r.buf)
	if len(r.buf) > 0 {
		if _, err := r.term.Write(r.buf); err != nil {
			return 0, err
		}
	}
	if cap(r.buf) > 256<<10 {
		r.buf = nil
	}
	return len(p), nil
}

// appendLine appends the host line when it can be drawn now: the stream
// is between sequences, does not hold the saved cursor, and has not left
// the alternate screen (tmux detaching: the line stays off the shell's
// screen).
func (r *Relay) appendLine(b []byte) []byte {
	if !r.line || !r.started || r.rows < 2 || r.cols < 2 || !r.guard.AtGround() || r.guard.CursorSaved() || r.guard.LeftAltScreen() {
		return b
	}
	if r.drawn == nil {
		r.drawn = lineBytes(r.lineText(), r.rows, r.cols)
	}
	return append(b, r.drawn...)
}

// redraw draws the line now if it can (else the next output write does).
// Called with r.mu held.
func (r *Relay) redraw() {
	r.drawn = nil
	if b := r.appendLine(nil); len(b) > 0 {
		r.term.Write(b) // a failed terminal ends the relay through Output's writes
	}
}

// Sizes forwards the terminal's sizes to the container's client, one row
// less when the relay draws the host line.
func (r *Relay) Sizes(in <-chan engine.TermSize) <-chan engine.TermSize {
	if in == nil {
		return nil
	}
	out := make(chan engine.TermSize, 1)
	go func() {
		defer close(out)
		for s := range in {
			r.mu.Lock()
			r.rows, r.cols = s.Rows, s.Cols
			if r.line && s.Rows >= 2 {
				s.Rows--
			}
			r.redraw()
			r.mu.Unlock()
			out <- s
		}
	}()
	return out
}

// Run follows the pending questions and who is connected until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	if !r.line {
		return
	}
	if r.who != nil {
		go r.follow(ctx)
	}
	if r.welcome != "" {
		go r.dropWelcome(ctx)
	}
	if r.qs == nil {
		<-ctx.Done()
		return
	}
	for qs := range r.qs.Watch(ctx) {
		r.mu.Lock()
		r.setPending(qs)
		r.mu.Unlock()
	}
}

// dropWelcome takes the welcome off the line after its time.
func (r *Relay) dropWelcome(ctx context.Context) {
	d := r.welcomeFor
	if d <= 0 {
		d = 30 * time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.welcome != "" {
		r.welcome = ""
		r.redraw()
	}
}

// follow reads who is connected and redraws the line when it changes.
func (r *Relay) follow(ctx context.Context) {
	t := time.NewTicker(participantsEvery)
	defer t.Stop()
	for {
		with := r.who()
		r.mu.Lock()
		if !slices.Equal(with, r.with) {
			r.with = with
			r.redraw()
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setPending takes a new pending list; an armed chord whose question is
// gone is dropped. Called with r.mu held.
func (r *Relay) setPending(qs []Question) {
	r.pending = qs
	if len(qs) > 0 {
		r.welcome = "" // a question needs the room
	}
	if r.state != idle && !r.isPending(r.armed.ID) {
		r.state, r.note = idle, "the question was withdrawn"
	}
	r.redraw()
}

func (r *Relay) isPending(id string) bool {
	for _, q := range r.pending {
		if q.ID == id {
			return true
		}
	}
	return false
}

// Pending is the questions the host line has now, oldest first.
func (r *Relay) Pending() []Question {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Question(nil), r.pending...)
}
