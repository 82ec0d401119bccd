package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/provenance"
)

// Provenance: every change an agent makes to a file through stem is
// recorded (package provenance) before it is made, so `stemctl audit
// blame` can tell the agent's lines from the student's. Like the audit
// intent, the record fails closed: no record, no edit.

// provenanceLog is the account's records, next to the audit log.
func (s *Server) provenanceLog() *provenance.Log { return provenance.Open(s.dirs.State) }

// provenanceWho is this session's identity for a record.
func (s *Server) provenanceWho() provenance.Who {
	id := s.opt.Identity
	return provenance.Who{Account: id.Account, Agent: id.Agent, Grant: id.Grant, KeyFP: id.KeyFP,
		Level: s.opt.Level.String(), Session: s.session}
}

// recordChange records a change made, or about to be made (Pending;
// closeChange if it then is not), to cp in the connected instance. It is
// also what an accepted proposal calls, with the buffer before it and the
// hunks the student accepted (ch.Proposal its id, ch.Who the proposer's
// identity when another session records it). Card and instance are filled
// in here, and Who when it is empty: this session's client.
func (s *Server) recordChange(ctx context.Context, c *conn, cp cardPath, ch provenance.Change) (int64, error) {
	ch.Card, ch.Path = c.target().Record.CardPath, cp.Rel
	ch.Instance, ch.ContainerID = c.target().Record.Instance, c.target().Record.ContainerID
	if ch.Who == (provenance.Who{}) {
		ch.Who = s.provenanceWho()
	}
	actx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	return s.provenanceLog().Record(actx, ch)
}

// closeChange records that a pending change was not made, or may not
// have been (a change that was made needs nothing more).
func (s *Server) closeChange(ctx context.Context, c *conn, cp cardPath, seq int64, res provenance.Result, detail string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := s.provenanceLog().Outcome(actx, c.target().Record.CardPath, cp.Rel, seq, res, detail); err != nil {
		// The change stays counted as made.
		s.logf("provenance: %v", err)
	}
}

// maxEditAttempts bounds how often an edit without expected_tick is tried
// again when the student typed between the snapshot and the edit.
const maxEditAttempts = 3

// recordedEdit replaces lines start..end of buf with lines, recorded: it
// snapshots the whole buffer, records the change, and makes it only if
// the buffer is still as snapshotted (checked in the same Neovim call).
// wantTick >= 0 is the agent's expected_tick.
func (s *Server) recordedEdit(ctx context.Context, c *conn, cp cardPath, buf, wantTick, start, end int, lines []string) (*nvim.Edited, error) {
	for attempt := 1; ; attempt++ {
		snap, err := c.nvim.Snapshot(ctx, buf, provenance.MaxSnapshotBytes)
		if err != nil {
			return nil, err
		}
		if wantTick >= 0 && snap.Tick != wantTick {
			return nil, refusedAs(errcode.Stale, "the buffer changed since you read it (tick %d, now %d): read it again", wantTick, snap.Tick)
		}
		if n := len(snap.Lines); !snap.TooLarge && (end > n || start > n+1) {
			return nil, badInput("lines %d..%d are outside the buffer (%d lines)", start, end, n)
		}
		seq, err := s.recordChange(ctx, c, cp, provenance.Change{Tool: "nvim_buffer_edit", Before: snap.Lines, NoSnapshot: snap.TooLarge,
			Hunks: []provenance.Hunk{{Start: start, End: end, Lines: lines}}, Pending: true})
		if err != nil {
			return nil, fmt.Errorf("nothing was changed, because %w", err)
		}
		ed, err := c.nvim.SetLinesAt(ctx, buf, snap.Tick, start, end, lines)
		switch {
		case err == nil:
			return ed, nil
		case maybeMade(err):
			s.closeChange(ctx, c, cp, seq, provenance.MaybeMade, err.Error())
			return nil, err
		}
		s.closeChange(ctx, c, cp, seq, provenance.NotMade, err.Error())
		if !errors.Is(err, nvim.ErrTickChanged) {
			return nil, err
		}
		if wantTick >= 0 || attempt == maxEditAttempts {
			return nil, refusedAs(errcode.Stale, "the buffer changed while the edit was being made: read it again")
		}
	}
}

// maybeMade reports whether an edit that failed with err may still have
// been made: Neovim did not answer, so it may have run it.
func maybeMade(err error) bool {
	return errors.Is(err, nvim.ErrUnavailable) || errors.Is(err, nvim.ErrRefused) || errors.Is(err, nvim.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
