package provenance

import (
	"slices"
	"strings"
	"time"
)

// Who wrote a line.
const (
	// ByContainer: not written by a change stem recorded, so written in
	// the container by the student or their programs (or anything else
	// that runs there: a shell command, a full-level agent's keys).
	ByContainer = "container"
	ByAgent     = "agent"
	ByTeacher   = "teacher"
	// ByUnknown: the walk stopped at a record without a snapshot before it
	// could tell.
	ByUnknown = "unknown"
)

// ContainerText says, for a person, who wrote a ByContainer line.
const ContainerText = "written in the container (the student or their programs)"

// Line is one line's blame.
type Line struct {
	N  int    // 1-based
	By string // ByContainer, ByAgent, ByTeacher, ByUnknown
	// Change is the record that wrote the line (agent and teacher lines).
	Change *Recorded
	// After, for a container line, is the recorded change it appeared after
	// (nil: it was there before the first one).
	After *Recorded
	// SameAs, for a container line, is the newest change that wrote a line
	// of the same text (at least minSameAsBytes of it, spaces aside)
	// which the walk did not trace to: the line may have been moved or
	// copied from the agent's, or typed alike. A hint, not an attribution.
	SameAs *Recorded
}

// minSameAsBytes: shorter lines ("}", "return 0;") are typed alike too
// often for SameAs to mean anything.
const minSameAsBytes = 10

// Blame attributes each line of current (the file as it is now) using
// the history h.
//
// It walks the changes newest first. Each step diffs the version the
// lines are traced in against the change's "after" (its snapshot with its
// hunks applied): a line with no counterpart appeared after that change,
// so the student wrote it; a line that is one of the change's new lines is
// the change's; any other line maps to its place in the snapshot before
// the change, and the walk goes on from there.
func Blame(h *History, current []string) []Line {
	cur := HashLines(current)
	out := make([]Line, len(cur))
	pos := make([]int32, len(cur)) // each open line's index in ver
	open := make([]int32, 0, len(cur))
	for i := range out {
		out[i] = Line{N: i + 1, By: ByContainer}
		pos[i] = int32(i)
		open = append(open, int32(i))
	}
	ver := cur
	for ci := len(h.Changes) - 1; ci >= 0 && len(open) > 0; ci-- {
		c := &h.Changes[ci]
		if c.NoSnapshot {
			for _, f := range open {
				out[f].By = ByUnknown
			}
			return out
		}
		after, back := apply(c.Before, c.Hunks)
		var m []int32
		if !slices.Equal(ver, after) {
			m = matchIndex(after, ver)
		}
		kept := open[:0]
		for _, f := range open {
			q := pos[f]
			if m != nil {
				q = m[q]
			}
			switch {
			case q < 0:
				out[f].After = c // appeared after this change
			case back[q] < 0:
				out[f].By, out[f].Change = c.Who.Kind(), c
			default:
				pos[f] = back[q]
				kept = append(kept, f)
			}
		}
		open = kept
		ver = c.Before
	}
	sameAs(h, current, cur, out)
	return out
}

// sameAs fills in Line.SameAs.
func sameAs(h *History, text []string, cur []LineHash, out []Line) {
	var wrote map[LineHash]*Recorded
	for i := range out {
		if out[i].By != ByContainer || len(strings.TrimSpace(text[i])) < minSameAsBytes {
			continue
		}
		if wrote == nil {
			wrote = map[LineHash]*Recorded{}
			for ci := range h.Changes {
				for _, hk := range h.Changes[ci].Hunks {
					for _, l := range hk.Lines {
						wrote[l] = &h.Changes[ci] // the newest wins
					}
				}
			}
		}
		out[i].SameAs = wrote[cur[i]]
	}
}

// apply returns the line hashes after a change and, for each, its index
// in before (-1 for a line the change wrote).
func apply(before []LineHash, hunks []HashedHunk) ([]LineHash, []int32) {
	n := len(before)
	for _, h := range hunks {
		n += len(h.Lines) - (h.End - h.Start + 1)
	}
	after := make([]LineHash, 0, n)
	back := make([]int32, 0, n)
	keep := func(from, to int) {
		for i := from; i < to; i++ {
			after = append(after, before[i])
			back = append(back, int32(i))
		}
	}
	at := 0
	for _, h := range hunks {
		keep(at, h.Start-1)
		for _, l := range h.Lines {
			after = append(after, l)
			back = append(back, -1)
		}
		at = max(h.End, h.Start-1)
	}
	keep(at, len(before))
	return after, back
}

// Summary counts lines by writer.
type Summary struct {
	Lines     int            `json:"lines"`
	Container int            `json:"container"`
	Unknown   int            `json:"unknown,omitempty"`
	ByWho     map[string]int `json:"by_writer,omitempty"` // Who.Label() -> lines
	// Last is the newest recorded change (zero without one).
	Last time.Time `json:"last_change,omitzero"`
}

// Summarize counts the lines of a blame.
func Summarize(h *History, lines []Line) Summary {
	s := Summary{Lines: len(lines), ByWho: map[string]int{}}
	for _, l := range lines {
		switch l.By {
		case ByContainer:
			s.Container++
		case ByUnknown:
			s.Unknown++
		default:
			s.ByWho[l.Change.Who.Label()]++
		}
	}
	if n := len(h.Changes); n > 0 {
		s.Last = h.Changes[n-1].Time
	}
	return s
}

// Diff returns the hunks that turn before into after (a shortest edit on
// line content): for a caller that has the text before and after a
// change rather than the change itself, such as an accepted proposal.
// It is empty when the two are the same.
func Diff(before, after []string) []Hunk {
	m := matchIndex(HashLines(before), HashLines(after))
	var hunks []Hunk
	i := 0 // next line of before
	for j := 0; j <= len(after); {
		if j < len(after) && int(m[j]) == i {
			i, j = i+1, j+1
			continue
		}
		// A hunk runs to the next matched line (or the end).
		next := len(before)
		k := j
		for ; k < len(after); k++ {
			if m[k] >= 0 {
				next = int(m[k])
				break
			}
		}
		if k > j || next > i {
			hunks = append(hunks, Hunk{Start: i + 1, End: next, Lines: append([]string(nil), after[j:k]...)})
		}
		if k == len(after) {
			break
		}
		i, j = next, k
	}
	return hunks
}
