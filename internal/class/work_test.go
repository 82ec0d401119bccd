package class

import (
	"slices"
	"testing"
	"time"
)

func code(n int) *int { return &n }

// Failed builds and tests count within FailWindow; a crash flags the
// student while it is recent; a good build is the last build after
// failures; idle is measured from the tmux activity.
func TestWorkAndTriage(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var w workLog
	w.add(Event{Type: "build_failed", Action: "build", ExitCode: code(2)}, t0)
	w.add(Event{Type: "test_failed", Action: "test", ExitCode: code(1)}, t0.Add(time.Minute))
	w.add(Event{Type: "gdb_stopped"}, t0.Add(2*time.Minute))
	if got := w.at(t0.Add(2 * time.Minute)); got.FailedRecently != 2 || got.LastBuild.Type != "test_failed" || got.LastEvent.Type != "gdb_stopped" || got.CrashedRecently {
		t.Fatalf("after two failures: %+v", got)
	}
	w.add(Event{Type: "build_failed", Action: "build", ExitCode: code(2)}, t0.Add(3*time.Minute))
	row := Row{Reach: ReachOK, Instances: []Instance{{State: "answers"}}}
	now := t0.Add(3 * time.Minute)
	row.Work = w.at(now)
	if f := triage(row, now); !slices.Contains(f, FlagFailing) {
		t.Fatalf("three failures in %v: flags %v", FailWindow, f)
	}
	// Ten minutes after the first, only two are recent.
	later := t0.Add(FailWindow + time.Second)
	row.Work = w.at(later)
	if f := triage(row, later); slices.Contains(f, FlagFailing) || row.Work.FailedRecently != 2 {
		t.Fatalf("failures older than the window still count: %+v %v", row.Work, f)
	}

	w.add(Event{Type: "program_exited", Action: "build", ExitCode: code(0)}, later)
	w.add(Event{Type: "program_crashed", ExitCode: code(139), Signal: "SIGSEGV"}, later)
	row.Work = w.at(later)
	if !row.Work.LastBuild.OK() || row.Work.LastEvent.Type != "program_crashed" {
		t.Fatalf("after a good build and a crash: %+v", row.Work)
	}
	if f := triage(row, later); !slices.Contains(f, FlagCrashed) {
		t.Fatalf("a crash now: %v", f)
	}
	after := later.Add(FailWindow + time.Second)
	row.Work = w.at(after)
	if f := triage(row, after); slices.Contains(f, FlagCrashed) {
		t.Fatalf("a crash long ago: %v", f)
	}

	act := after.Add(-IdleAfter)
	row.Activity = &act
	if f := triage(row, after); !slices.Contains(f, FlagIdle) {
		t.Fatalf("no activity for %v: %v", IdleAfter, f)
	}
	act = after.Add(-IdleAfter + time.Second)
	if f := triage(row, after); slices.Contains(f, FlagIdle) {
		t.Fatalf("active a moment ago: %v", f)
	}
	// The flags order the table: a crash outranks failures, which
	// outrank idleness.
	if !(rank[FlagCrashed] > rank[FlagFailing] && rank[FlagFailing] > rank[FlagIdle]) {
		t.Fatal("ranks")
	}
}

// Only the last maxFailures failures are kept, however many arrive.
func TestWorkLogBounded(t *testing.T) {
	var w workLog
	t0 := time.Now()
	for i := range 10000 {
		w.add(Event{Type: "build_failed", Action: "build", ExitCode: code(2)}, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(w.failures) != maxFailures {
		t.Fatalf("%d failures kept", len(w.failures))
	}
}
