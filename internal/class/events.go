package class

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/lib/evring"
)

// Event is one student's session event in the class's merged stream.
type Event struct {
	Seq        int64             `json:"seq"` // the class's own, increasing
	Student    string            `json:"student"`
	StudentSeq int64             `json:"student_seq"` // the event's seq in that student's session
	Type       string            `json:"type"`
	Time       time.Time         `json:"time"`
	Instance   string            `json:"instance"`
	Pane       string            `json:"pane,omitempty"`
	Role       string            `json:"role,omitempty"`
	Action     string            `json:"action,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	Signal     string            `json:"signal,omitempty"`
	GDB        map[string]string `json:"gdb,omitempty"`
}

// Link is the state of the open session with one student's gate.
type Link struct {
	Student   string     `json:"student"`
	Connected bool       `json:"connected"`
	Instance  string     `json:"instance,omitempty"`
	Level     string     `json:"level,omitempty"`   // the grant's, while connected
	Since     *time.Time `json:"since,omitempty"`   // connected since, or down since
	Error     string     `json:"error,omitempty"`   // why the last session ended or failed
	Retry     *time.Time `json:"retry,omitempty"`   // the next attempt
	CutOff    bool       `json:"cut_off,omitempty"` // the last session went past its budget (Error says which)
	Silent    bool       `json:"silent,omitempty"`  // the last session ended because the student's side stopped answering
	// NoInstance: the student's side answered, but none of their
	// instances does (stopped, or not started): reachable, not gone.
	NoInstance bool `json:"no_instance,omitempty"`
	// Dropped counts this student's events the hub no longer keeps: each
	// student has a fair share of the class's event memory, and their
	// own oldest go first.
	Dropped int64 `json:"events_dropped,omitempty"`
}

// HubOptions configure a Hub.
type HubOptions struct {
	Options               // Resolve, SSH, Timeout (per connection attempt)
	Poll    time.Duration // session_events' wait_ms per call (default 20s)
	// Backoff between attempts doubles from MinBackoff to MaxBackoff
	// (defaults 1s, 30s) and starts over after a session that lasted.
	MinBackoff, MaxBackoff time.Duration
	Ring                   int // events kept for the class (default 2048), shared fairly among the students
	// Silent: an open session quiet this long (pinged meanwhile) ends, the
	// student gone (default DefaultSilent; negative: only each call's
	// deadline notices a silent peer).
	Silent time.Duration
	// Tools are the tool names the class may forward; a name a student's
	// gate offers outside them is ignored (nil: any name of lower-case
	// letters, digits and '_').
	Tools []string
}

// Hub keeps one MCP session open with each student's gate, reconnecting
// with backoff, and merges their session events into one stream.
type Hub struct {
	students []Student
	opt      HubOptions

	mu sync.Mutex
	// rings are each student's share of the class's events: the same
	// bound for each, so one busy student cannot push out the others'.
	rings   map[string]*evring.Ring[Event]
	perRing int
	seq     int64
	changed evring.Signal // after every event
	links   map[string]*Link
	open    map[string]*openSession // by student, while connected
	probing map[string]*probeCall   // status probes under way, by student
	work    map[string]*workLog     // what each student's events said
}

// openSession is a connected student's session and what its grant allows.
type openSession struct {
	sess         *mcpSession
	level, grant string
	tools        map[string]bool
}

// NewHub prepares a hub for students; Run starts it.
func NewHub(students []Student, opt HubOptions) *Hub {
	if opt.Poll <= 0 {
		opt.Poll = 20 * time.Second
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = time.Second
	}
	if opt.MaxBackoff < opt.MinBackoff {
		opt.MaxBackoff = max(30*time.Second, opt.MinBackoff)
	}
	if opt.Ring <= 0 {
		opt.Ring = 2048
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Silent == 0 {
		opt.Silent = DefaultSilent
	}
	h := &Hub{students: students, opt: opt, links: map[string]*Link{}, open: map[string]*openSession{}, probing: map[string]*probeCall{}, work: map[string]*workLog{},
		rings: map[string]*evring.Ring[Event]{}, perRing: max(minPerStudent, opt.Ring/max(1, len(students)))}
	for _, s := range students {
		h.links[s.Name] = &Link{Student: s.Name, Error: "not connected yet"}
		h.rings[s.Name] = &evring.Ring[Event]{}
	}
	return h
}

// Run keeps every student's session until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range h.students {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.keep(ctx, s)
		}()
	}
	wg.Wait()
}

// keep connects to one student again and again, with backoff.
func (h *Hub) keep(ctx context.Context, s Student) {
	backoff := h.opt.MinBackoff
	for ctx.Err() == nil {
		start := time.Now()
		err := h.serve(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > h.opt.MaxBackoff {
			backoff = h.opt.MinBackoff // it lasted: a fresh failure
		}
		now := time.Now()
		retry := now.Add(backoff)
		h.setLink(s.Name, func(l *Link) {
			if l.Connected || l.Since == nil {
				l.Since = &now
			}
			l.Connected, l.Level, l.Error, l.Retry = false, "", clean(err.Error()), &retry
			l.CutOff, l.Silent, l.NoInstance = errors.Is(err, errCutOff), errors.Is(err, errSilent), errors.Is(err, errNoInstance)
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, h.opt.MaxBackoff)
	}
}

// errNoInstance: the student's gate answered, and no instance of theirs
// does.
var errNoInstance = errors.New("no instance of this student answers (none started, or tmux and Neovim are down)")

// serve asks the student's gate which instance answers, opens an MCP
// session on it and relays its events until the session fails.
func (h *Hub) serve(ctx context.Context, s Student) error {
	row := h.probe(ctx, s)
	if row.Reach != ReachOK {
		return fmt.Errorf("%s: %s", row.Reach, row.Why)
	}
	instance := ""
	for _, in := range row.Instances {
		if in.State == "answers" {
			instance = in.Instance
			break
		}
	}
	if instance == "" {
		return errNoInstance
	}
	tg, _, err := h.opt.Resolve(ctx, s)
	if err != nil {
		return err
	}
	args, err := tg.Command("mcp", instance)
	if err != nil {
		return err
	}
	ssh := h.opt.SSH
	if ssh == "" {
		ssh = "ssh"
	}
	sess, err := dialMCP(ctx, ssh, args, h.opt.Timeout)
	if err != nil {
		return err
	}
	defer sess.close()
	if h.opt.Silent > 0 {
		go sess.watch(ctx, h.opt.Silent)
	}
	lctx, cancel := context.WithTimeout(ctx, h.opt.Timeout)
	names, err := sess.tools(lctx)
	cancel()
	if err != nil {
		return err
	}
	op := &openSession{sess: sess, level: row.Level, grant: row.Grant, tools: map[string]bool{}}
	for _, n := range names {
		if h.knownTool(n) {
			op.tools[n] = true
		}
	}
	h.mu.Lock()
	h.open[s.Name] = op
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.open, s.Name)
		h.mu.Unlock()
	}()
	// Each gate session numbers its own events from 1. The first call
	// does not wait: once it returns, the gate watches the panes, and the
	// link counts as connected.
	var since int64
	for first := true; ; first = false {
		wait := h.opt.Poll
		if first {
			wait = 0
		}
		cctx, cancel := context.WithTimeout(ctx, wait+h.opt.Timeout)
		evs, err := sess.events(cctx, since, wait)
		cancel()
		if err != nil {
			return err
		}
		if first {
			now := time.Now()
			h.setLink(s.Name, func(l *Link) {
				l.Connected, l.Instance, l.Level, l.Since, l.Error, l.Retry, l.CutOff, l.Silent = true, clean(instance), row.Level, &now, "", nil, false, false
			})
		}
		for _, ev := range evs {
			if ev.Seq <= since {
				continue // a gate that repeats itself is not believed twice
			}
			since = ev.Seq
			h.publish(s.Name, ev)
		}
	}
}

func (h *Hub) setLink(student string, f func(*Link)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h.links[student])
}

// publish adds a student's event, cleaned, to the stream. Its time is
// when the teacher's side received it: the student's clock is theirs.
func (h *Hub) publish(student string, ev studentEvent) {
	now := time.Now()
	e := Event{Student: student, StudentSeq: ev.Seq, Type: clean(ev.Type), Time: now.UTC(), Instance: clean(ev.Instance),
		Pane: clean(ev.Pane), Role: clean(ev.Role), Action: clean(ev.Action), ExitCode: ev.ExitCode, Signal: clean(ev.Signal), GDB: flatGDB(ev.GDB)}
	h.mu.Lock()
	h.seq++
	e.Seq = h.seq
	h.rings[student].Add(e.Seq, e, h.perRing)
	w := h.work[student]
	if w == nil {
		w = &workLog{}
		h.work[student] = w
	}
	w.add(e, now)
	h.mu.Unlock()
	h.changed.Broadcast()
}

// Links is every student's session state, by name.
func (h *Hub) Links() []Link {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Link, 0, len(h.links))
	for _, l := range h.links {
		c := *l
		c.Dropped = h.rings[l.Student].Dropped()
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Student < out[j].Student })
	return out
}
