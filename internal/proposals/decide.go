package proposals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/provenance"
	"github.com/stem-edu/stem/internal/registry"
)

// maxFileBytes bounds a file the host rewrites when the proposal's file
// is not open in the editor.
const maxFileBytes = 16 << 20

// Decision inputs.
type Decide struct {
	Accept bool
	// Hunks are the 1-based hunks decided; none: every pending one.
	Hunks []int
	// Input is the host input the student answered at.
	Input string
	// Instance is the proposal's instance (its card and socket dir).
	Instance registry.Record
	StateDir string
	Audit    *audit.Log
	// Dial reaches the student's Neovim; nil or an error: not running.
	Dial func(ctx context.Context) (*nvim.Client, error)
	Now  func() time.Time
}

// Outcome is what a decision did.
type Outcome struct {
	Record *Record
	// Via: "neovim" (the open buffer), "file" (the saved file), "" (a
	// rejection: nothing to apply).
	Via string
	// EditorNote is why the editor could not be told, if it could not.
	EditorNote string
}

// ErrDecided: the proposal (or the hunk) is no longer pending.
var ErrDecided = errors.New("already decided")

// Decide settles r as d says: it applies the accepted hunks from the host
// (the editor's buffer when the file is open there, else the file),
// records them in provenance as the proposer's lines accepted at
// d.Input, writes the decision to the audit log, stores it, and tells
// the editor. A hunk whose lines changed is stale and applies nothing.
func (s *Store) Decide(ctx context.Context, r *Record, d Decide) (*Outcome, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	pick, err := picked(r, d.Hunks)
	if err != nil {
		return nil, err
	}
	if r.Card != "" && r.Card != d.Instance.CardPath {
		return nil, fmt.Errorf("proposal %s was made in the card %s, and instance %s now uses %s: nothing was applied", r.ID, r.Card, d.Instance.Instance, d.Instance.CardPath)
	}
	// Auditing fails closed: nothing is applied that cannot be recorded.
	if err := d.Audit.Check(ctx); err != nil {
		return nil, err
	}
	out := &Outcome{Record: r}
	states := make([]string, len(r.Hunks))
	for i, h := range r.Hunks {
		states[i] = h.State
		if pick[i] {
			states[i] = Rejected
			if d.Accept {
				states[i] = Accepted
			}
		}
	}
	var cl *nvim.Client
	if d.Dial != nil {
		if c, err := d.Dial(ctx); err == nil {
			cl = c
			defer c.Close()
		} else {
			out.EditorNote = err.Error()
		}
	}
	var before []string
	var rows []int
	noSnap := false
	if d.Accept {
		before, rows, noSnap, out.Via, err = s.apply(ctx, cl, r, pick, states, d)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if pick[i] && rows[i] < 0 {
				states[i] = Stale
			}
		}
	}
	for i := range r.Hunks {
		r.Hunks[i].State = states[i]
	}
	setAt(r, rows)
	r.Decided = &Decision{Input: d.Input, At: d.Now().UTC(), Via: out.Via}
	var perr error
	if d.Accept {
		perr = s.recordProvenance(ctx, r, d, before, rows, noSnap)
	}
	if err := s.Put(r); err != nil {
		return nil, err
	}
	if err := s.audit(ctx, r, d); err != nil {
		return out, err
	}
	if cl != nil && out.Via != "neovim" {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := cl.Settle(sctx, r.ID, r.Key, states); err != nil {
			out.EditorNote = err.Error()
		}
		cancel()
	}
	return out, perr
}

// picked is the set of hunks d names, each of them pending.
func picked(r *Record, hunks []int) (map[int]bool, error) {
	pick := map[int]bool{}
	if len(hunks) == 0 {
		for i, h := range r.Hunks {
			if h.State == Pending {
				pick[i] = true
			}
		}
		if len(pick) == 0 {
			return nil, fmt.Errorf("proposal %s is %s: %w", r.ID, r.State, ErrDecided)
		}
		return pick, nil
	}
	for _, k := range hunks {
		if k < 1 || k > len(r.Hunks) {
			return nil, fmt.Errorf("proposal %s has %d hunks; there is no hunk %d", r.ID, len(r.Hunks), k)
		}
		if st := r.Hunks[k-1].State; st != Pending {
			return nil, fmt.Errorf("hunk %d of proposal %s is %s: %w", k, r.ID, st, ErrDecided)
		}
		pick[k-1] = true
	}
	return pick, nil
}

// edits are r's hunks for the editor: the picked ones applied.
func edits(r *Record, pick map[int]bool, states []string) []nvim.HunkEdit {
	out := make([]nvim.HunkEdit, len(r.Hunks))
	for i, h := range r.Hunks {
		row := h.Start - 1
		if len(h.Old) == 0 && !h.Before {
			row = h.Start - 2 // the line above the insertion
		}
		out[i] = nvim.HunkEdit{Row: row, Old: h.Old, New: h.New, Ctx: h.Ctx, Before: h.Before, Settle: states[i], Apply: pick[i]}
	}
	return out
}

// apply makes the accepted hunks: in the open buffer, else in the file.
// It returns the text before, each hunk's row in it (-1: not applied).
func (s *Store) apply(ctx context.Context, cl *nvim.Client, r *Record, pick map[int]bool, states []string, d Decide) (before []string, rows []int, noSnap bool, via string, err error) {
	es := edits(r, pick, states)
	abs := d.Instance.CardPath + "/" + r.Path
	if cl != nil {
		// A Neovim that answered the dial but not this call may hold the
		// file: writing it on disk then would be overwritten by its next
		// save, so nothing is done.
		a, err := cl.ApplyHunks(ctx, abs, r.ID, r.Key, es, provenance.MaxSnapshotBytes)
		switch {
		case errors.Is(err, nvim.ErrBlocked):
			return nil, nil, false, "", fmt.Errorf("apply proposal %s: %w; answer it in the editor and accept again", r.ID, err)
		case err != nil:
			return nil, nil, false, "", fmt.Errorf("apply proposal %s in the student's Neovim (nothing was applied; accept again): %w", r.ID, err)
		case a.Loaded:
			return a.Before, a.Rows, a.Before == nil, "neovim", nil
		}
	}
	before, rows, err = applyFile(d.Instance.CardPath, r.Path, es)
	if err != nil {
		return nil, nil, false, "", fmt.Errorf("apply proposal %s to %s: %w", r.ID, r.Path, err)
	}
	return before, rows, false, "file", nil
}

// applyFile applies es to the saved file at the hunks' own lines,
// through the card's safe write path (no link below the card followed).
func applyFile(card, rel string, es []nvim.HunkEdit) ([]string, []int, error) {
	fi, err := beneath.Lstat(card, rel)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", rel)
	}
	data, err := beneath.ReadFile(card, rel, maxFileBytes)
	if err != nil {
		return nil, nil, err
	}
	lines := provenance.SplitFile(data)
	rows := make([]int, len(es))
	var hunks []provenance.Hunk
	for i, e := range es {
		rows[i] = -1
		want := e.Old
		if len(want) == 0 {
			want = []string{e.Ctx}
		}
		if !e.Apply || e.Row < 0 || e.Row+len(want) > len(lines) || !slices.Equal(lines[e.Row:e.Row+len(want)], want) {
			continue
		}
		rows[i] = e.Row
		hunks = append(hunks, hunkAt(e, e.Row))
	}
	sort.Slice(hunks, func(i, j int) bool { return hunks[i].Start < hunks[j].Start })
	if len(hunks) > 0 {
		text := strings.Join(provenance.Apply(lines, hunks), "\n")
		if len(data) == 0 || data[len(data)-1] == '\n' {
			text += "\n"
		}
		if err := beneath.WriteFileAtomic(card, rel, []byte(text), fi.Mode().Perm()); err != nil {
			return nil, nil, err
		}
	}
	return lines, rows, nil
}

// hunkAt is e, found at row, as a change to the text before.
func hunkAt(e nvim.HunkEdit, row int) provenance.Hunk {
	if len(e.Old) > 0 {
		return provenance.Hunk{Start: row + 1, End: row + len(e.Old), Lines: e.New}
	}
	at := row + 1
	if e.Before {
		at = row
	}
	return provenance.Hunk{Start: at + 1, End: at, Lines: e.New}
}

// setAt fills in where each applied hunk's new lines went.
func setAt(r *Record, rows []int) {
	type hk struct{ i, row int }
	var hs []hk
	for i, row := range rows {
		if row >= 0 {
			hs = append(hs, hk{i, row})
		}
	}
	sort.Slice(hs, func(a, b int) bool { return hs[a].row < hs[b].row })
	shift := 0
	for _, x := range hs {
		h := &r.Hunks[x.i]
		start := x.row + 1
		if len(h.Old) == 0 && !h.Before {
			start = x.row + 2
		}
		h.At = start + shift
		shift += len(h.New) - len(h.Old)
	}
}

func (s *Store) recordProvenance(ctx context.Context, r *Record, d Decide, before []string, rows []int, noSnap bool) error {
	var hunks []provenance.Hunk
	for i, row := range rows {
		if row < 0 || len(r.Hunks[i].New) == 0 {
			continue
		}
		h := r.Hunks[i]
		hunks = append(hunks, hunkAt(nvim.HunkEdit{Old: h.Old, New: h.New, Before: h.Before}, row))
	}
	if len(hunks) == 0 {
		return nil
	}
	sort.Slice(hunks, func(i, j int) bool { return hunks[i].Start < hunks[j].Start })
	ch := provenance.Change{Card: d.Instance.CardPath, Path: r.Path, Who: r.Who, Tool: r.Tool, Proposal: r.ID,
		AcceptedBy: "the student at " + d.Input, Instance: r.Instance, ContainerID: d.Instance.ContainerID,
		Before: before, NoSnapshot: noSnap, Hunks: hunks}
	if _, err := provenance.Open(d.StateDir).Record(ctx, ch); err != nil {
		return fmt.Errorf("proposal %s was applied but its provenance could not be recorded: %w", r.ID, err)
	}
	return nil
}

func (s *Store) audit(ctx context.Context, r *Record, d Decide) error {
	var parts []string
	for i, h := range r.Hunks {
		p := fmt.Sprintf("%d:%s", i+1, h.State)
		if h.At > 0 {
			p += fmt.Sprintf("@%d", h.At)
		}
		parts = append(parts, p)
	}
	verb := "rejected"
	if d.Accept {
		verb = "accepted"
	}
	e := audit.Entry{Event: audit.ProposalDecision, Account: r.Who.Account, Agent: r.Who.Agent, Grant: r.Who.Grant, KeyFP: r.Who.KeyFP,
		Session: r.Who.Session, Level: r.Who.Level, Instance: r.Instance, ContainerID: d.Instance.ContainerID, Tool: r.Tool,
		Intent: r.AuditSeq, Result: r.State,
		Detail: fmt.Sprintf("%s (%s) by %s: %s by the student at %s; hunks %s", r.ID, r.Path, r.From, verb, d.Input, strings.Join(parts, " "))}
	if r.Decided != nil && r.Decided.Via != "" {
		e.Detail += "; applied to the " + map[string]string{"neovim": "open buffer", "file": "saved file"}[r.Decided.Via]
	}
	if _, err := d.Audit.Append(ctx, e); err != nil {
		return fmt.Errorf("proposal %s was decided but the decision could not be audited: %w", r.ID, err)
	}
	return nil
}

// TTYName names the terminal f is ("/dev/pts/5"), or says it is one.
func TTYName(f *os.File) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil || !strings.HasPrefix(p, "/dev/") {
		return "a terminal"
	}
	return p
}
