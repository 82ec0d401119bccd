package class

import (
	"time"

	"github.com/stem-edu/stem/internal/sessionevent"
)

// Triage thresholds for what the events and tmux say about a student.
const (
	// IdleAfter: no output in the student's tmux and no key from their
	// terminal for this long flags the student as idle.
	IdleAfter = 10 * time.Minute
	// FailWindow and FailedBuilds: this many failed builds or tests within
	// the window flag the student as stuck on failures; a crash within the
	// window flags them too.
	FailWindow   = 10 * time.Minute
	FailedBuilds = 3
	maxFailures  = 16
)

// Work is what a student's session events said about their work. Only a
// hub sees events (it keeps a session with each student's gate), so rows
// from a one-shot status have none.
type Work struct {
	LastBuild *Outcome `json:"last_build,omitempty"` // the last build or test
	LastEvent *Outcome `json:"last_event,omitempty"`
	// FailedRecently counts builds and tests that failed within FailWindow.
	FailedRecently int `json:"failed_recently"`
	// CrashedRecently: a program crashed within FailWindow.
	CrashedRecently bool `json:"crashed_recently,omitempty"`
}

// Outcome is one event, reduced to what the status table shows.
type Outcome struct {
	Type     string    `json:"type"`
	Action   string    `json:"action,omitempty"` // build, test, run, ... (the task's command it was)
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Time     time.Time `json:"time"` // when the hub received it (the student's clock is theirs)
}

// OK says whether a build or test succeeded.
func (o Outcome) OK() bool { return o.ExitCode != nil && *o.ExitCode == 0 && o.Signal == "" }

// workLog is one student's recent work, kept by the hub as events arrive.
type workLog struct {
	lastBuild, lastEvent *Outcome
	failures             []time.Time // failed builds and tests, at most maxFailures
	crash                time.Time
}

func (w *workLog) add(e Event, now time.Time) {
	o := &Outcome{Type: e.Type, Action: e.Action, ExitCode: e.ExitCode, Signal: e.Signal, Instance: e.Instance, Time: now}
	w.lastEvent = o
	switch {
	case e.Action == "build" || e.Action == "test" || e.Type == sessionevent.BuildFailed || e.Type == sessionevent.TestFailed:
		w.lastBuild = o
		if e.Type == sessionevent.BuildFailed || e.Type == sessionevent.TestFailed {
			w.failures = append(w.failures, now)
			if len(w.failures) > maxFailures {
				w.failures = w.failures[len(w.failures)-maxFailures:]
			}
		}
	}
	if e.Type == sessionevent.ProgramCrashed {
		w.crash = now
	}
}

// at is the log as of now.
func (w *workLog) at(now time.Time) *Work {
	out := &Work{LastBuild: w.lastBuild, LastEvent: w.lastEvent}
	for _, t := range w.failures {
		if now.Sub(t) <= FailWindow {
			out.FailedRecently++
		}
	}
	out.CrashedRecently = !w.crash.IsZero() && now.Sub(w.crash) <= FailWindow
	return out
}
