package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/sessionevent"
)

// Delivery rules of event lines (see docs/agents.md, "Events").
const (
	// eventInterval is the least time between two lines.
	eventInterval = 5 * time.Second
	// keyQuiet is how long the student's keys must have been quiet.
	keyQuiet = 2 * time.Second
	// outputQuiet is how long the CLI's output must have been quiet
	// before its screen is read for the idle prompt.
	outputQuiet = 300 * time.Millisecond
	// maxUnattended is how many lines go in without the student pressing
	// a key in between: an agent that reacts to the events its own tool
	// calls cause stops being fed after that many.
	maxUnattended = 10
	// maxEventLine bounds a line.
	maxEventLine = 200
)

// delivered reports whether an event of this type becomes a line: what
// went wrong or stopped. A command that merely finished (program_exited)
// stays in session_events.
func delivered(typ string) bool {
	switch typ {
	case sessionevent.BuildFailed, sessionevent.TestFailed, sessionevent.ProgramCrashed, sessionevent.GDBStopped, sessionevent.GDBExited:
		return true
	}
	return false
}

// token keeps s only as a short identifier-like word (a function, a file,
// a signal, a gdb reason): letters, digits and _ . : / + ~ < > % -, at most
// 48 bytes. Anything else in it (spaces, quotes, brackets, text a program
// chose to look like an instruction) is dropped, so a line carries names
// and numbers, never sentences from the session.
func token(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 48 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_.:/+~<>%-", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// EventLine is the one line the agent is given for ev, or "" for an event
// that is not delivered. more is how many earlier events this line
// replaced while it waited.
func EventLine(ev SessionEvent, more int) string {
	if !delivered(ev.Type) {
		return ""
	}
	code := ""
	if ev.ExitCode != nil {
		code = "exit " + strconv.Itoa(*ev.ExitCode)
	}
	pane := ""
	if p := token(ev.Pane); p != "" {
		pane = " in pane " + p
	}
	var what string
	switch ev.Type {
	case sessionevent.BuildFailed:
		what = joinWords("build failed:", code) + pane
	case sessionevent.TestFailed:
		what = joinWords("tests failed:", code) + pane
	case sessionevent.ProgramCrashed:
		what = joinWords("program crashed:", token(ev.Signal), code) + pane
	case sessionevent.GDBStopped:
		what = joinWords("gdb stopped:", token(jsonString(ev.GDB["reason"])), token(ev.Signal)) + gdbWhere(ev.GDB)
	case sessionevent.GDBExited:
		if s := token(ev.Signal); s != "" {
			what = "gdb: the program was killed by " + s
		} else {
			what = joinWords("gdb: the program exited,", code)
		}
	}
	line := runspec.EventPrefix + " " + what
	if more > 0 {
		line += fmt.Sprintf(" (+%d earlier, see session_events)", more)
	}
	if len(line) > maxEventLine {
		line = line[:maxEventLine]
	}
	return line
}

// gdbWhere is " in FUNC at FILE:LINE" from a gdb event's frame.
func gdbWhere(g map[string]any) string {
	f, _ := g["frame"].(map[string]any)
	if f == nil {
		return ""
	}
	out := ""
	if fn := token(jsonString(f["func"])); fn != "" {
		out += " in " + fn
	}
	file := jsonString(f["file"])
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	if file = token(file); file != "" {
		out += " at " + file
		if l := token(jsonString(f["line"])); l != "" {
			out += ":" + l
		}
	}
	return out
}

func jsonString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// join joins the non-empty words with spaces, the first word and the
// others as given.
func joinWords(words ...string) string {
	var out []string
	for _, w := range words {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.TrimSuffix(strings.Join(out, " "), ":")
}

// pendingLine is the one line waiting for the agent's next idle moment:
// a newer event replaces it and is counted.
type pendingLine struct {
	ev    *SessionEvent
	more  int
	since time.Time // the first replaced event's arrival
}

func (p *pendingLine) add(ev SessionEvent) {
	if p.ev != nil {
		p.more++
	} else {
		p.since = ev.Received
	}
	p.ev = &ev
}

func (p *pendingLine) line() string {
	if p.ev == nil {
		return ""
	}
	return EventLine(*p.ev, p.more)
}

func (p *pendingLine) clear() { *p = pendingLine{} }

// gate is the part of the rules that does not need the screen: a line
// pending, the interval since the last one, the student's keys quiet, and
// not too many lines without the student.
type gate struct {
	lastSent   time.Time
	unattended int
}

// open reports whether a line may go in now; why says what holds it.
func (g *gate) open(now, lastKey time.Time) (bool, string) {
	switch {
	case !g.lastSent.IsZero() && now.Sub(g.lastSent) < eventInterval:
		return false, "interval"
	case now.Sub(lastKey) < keyQuiet:
		return false, "the student is typing"
	case lastKey.After(g.lastSent):
		g.unattended = 0
	}
	if g.unattended >= maxUnattended {
		return false, "no key from the student since " + strconv.Itoa(maxUnattended) + " lines"
	}
	return true, ""
}

func (g *gate) sent(now time.Time) {
	g.lastSent = now
	g.unattended++
}
