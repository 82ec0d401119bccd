package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/provenance"
)

// Proposals: under a task whose agent policy is edits = "propose",
// nvim_buffer_edit hands the change to the student's editor as a proposal
// (the plugin's lua/stem/proposals.lua shows it as a diff labelled with
// this client's name) instead of making it, and writes it to the host's
// proposal store (package proposals): the lines it replaces, as this
// server read them, the hunks and the proposer. The student decides on
// the host (`stemctl proposals accept|reject`), which applies the change
// from there and records it; nothing in the editor or the container can.
// proposal_status reads the host store, so the outcome is the same
// whether or not this session is still there when the student decides.

const (
	maxProposals       = 256 // remembered per server, for proposal_status
	maxProposalWaitMS  = 60000
	proposalPoll       = 50 * time.Millisecond
	proposalStatusTool = "proposal_status"
)

// proposalBook is which proposals this server made: instance + id -> key.
type proposalBook struct {
	mu    sync.Mutex
	order []string
	byKey map[string]string
	asked map[string]bool // keys put to the student now (proposal_requests.go)
}

func (b *proposalBook) add(instance, id, key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byKey == nil {
		b.byKey = map[string]string{}
	}
	if len(b.order) >= maxProposals {
		delete(b.byKey, b.order[0])
		b.order = b.order[1:]
	}
	k := instance + "\x00" + id
	b.order = append(b.order, k)
	b.byKey[k] = key
}

func (b *proposalBook) get(instance, id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[instance+"\x00"+id]
}

func linesDigest(lines []string) string {
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// propose is nvim_buffer_edit under edits = "propose": the checks of an
// edit have passed; the change goes to the student as a proposal.
func (s *Server) propose(ctx context.Context, c *conn, cp cardPath, buf, start, end int, lines []string) (any, error) {
	key, err := proposals.NewKey()
	if err != nil {
		return nil, err
	}
	// The host's copy of the lines the proposal replaces: read before,
	// and the editor must report the same buffer tick when it proposes.
	snap, err := c.nvim.Snapshot(ctx, buf, provenance.MaxSnapshotBytes)
	if err != nil {
		return nil, err
	}
	if snap.TooLarge {
		return nil, refusedAs(errcode.TooLarge, "the buffer is over %d bytes: too large to propose an edit in", provenance.MaxSnapshotBytes)
	}
	if end > len(snap.Lines) || start > len(snap.Lines)+1 {
		return nil, badInput("lines %d..%d are outside the buffer (%d lines)", start, end, len(snap.Lines))
	}
	who := s.requester()
	pr, err := c.nvim.Propose(ctx, buf, start, end, lines, who, key)
	if err != nil {
		return nil, err
	}
	withdraw := func(why error) error {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
		defer cancel()
		if werr := c.nvim.Withdraw(wctx, pr.ID, key); werr != nil {
			return fmt.Errorf("proposal %s: %v; it could not be taken back from the student's editor either (%v)", pr.ID, why, werr)
		}
		return fmt.Errorf("proposal %s: %w: it was taken back, nothing was proposed", pr.ID, why)
	}
	if pr.Tick != snap.Tick {
		return nil, withdraw(refusedAs(errcode.Stale, "the buffer changed while the proposal was being made: propose again"))
	}
	t := c.target().Record
	rec := &proposals.Record{Key: key, ID: pr.ID, Instance: t.Instance, Card: t.CardPath, Path: cp.Rel, Buf: buf,
		From: who, Who: s.provenanceWho(), Tool: "nvim_buffer_edit", Created: time.Now().UTC()}
	old := snap.Lines[start-1 : end]
	for _, h := range pr.Hunks {
		ph := proposals.Hunk{New: lines[h.Start-1 : h.Start-1+h.Count], State: proposals.Pending}
		if h.Old > 0 {
			ph.Start, ph.Old = start+h.OldStart-1, old[h.OldStart-1:h.OldStart-1+h.Old]
		} else if after := start - 1 + h.OldStart; after >= 1 {
			ph.Start, ph.Ctx = after+1, snap.Lines[after-1]
		} else {
			ph.Start, ph.Before = 1, true
			if len(snap.Lines) > 0 {
				ph.Ctx = snap.Lines[0]
			}
		}
		rec.Hunks = append(rec.Hunks, ph)
	}
	e := s.callEntry(audit.ProposalCreate, "nvim_buffer_edit", linesDigest(lines))
	e.Result = "pending"
	e.Detail = fmt.Sprintf("%s by %s: %s lines %d..%d -> %d lines in %d hunks", pr.ID, who, cp.Rel, start, end, len(lines), len(pr.Hunks))
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	written, err := s.audit.Append(actx, e)
	cancel()
	if err != nil {
		// Unrecorded, it must not stay before the student.
		return nil, withdraw(fmt.Errorf("it could not be audited (%v)", err))
	}
	rec.AuditSeq = written.Seq
	if err := proposals.Open(s.dirs.State, t.Instance).Put(rec); err != nil {
		return nil, withdraw(err)
	}
	s.props.add(t.Instance, pr.ID, key)
	hunks := make([]map[string]any, len(pr.Hunks))
	for i, h := range pr.Hunks {
		hunks[i] = map[string]any{"hunk": i + 1, "old_lines": h.Old, "new_lines": h.Count}
	}
	return map[string]any{
		"path": cp.Rel, "buffer": buf, "proposal": pr.ID, "state": proposals.Pending, "hunks": hunks, "edited": false,
		"note": "The task's agent policy is edits = \"propose\": the buffer is unchanged. The student sees the change in their editor and accepts it, one hunk of it, or rejects it on their machine; call proposal_status with this id (and wait_ms) to learn which.",
	}, nil
}

func proposalTools() []toolDef {
	return []toolDef{{
		timeout: (maxProposalWaitMS + 5000) * time.Millisecond,
		tool: mcp.NewTool(proposalStatusTool,
			mcp.WithDescription("The outcome of an edit this session proposed (nvim_buffer_edit under the task's edits = \"propose\" policy): pending, accepted, partially_accepted (some hunks), rejected, or stale (the lines changed first; nothing was applied). Waits up to wait_ms for the student to decide. Only this session's proposals."),
			mcp.WithString("proposal", mcp.Required(), mcp.Description("the id nvim_buffer_edit returned (p1, p2, ...)"), mcp.MaxLength(16)),
			mcp.WithInteger("wait_ms", mcp.Description("wait this long for the student's decision (default 0, at most 60000)"), mcp.Min(0), mcp.Max(maxProposalWaitMS)),
			readOnly()),
		run: runProposalStatus,
	}}
}

func runProposalStatus(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
	id, err := reqString(req, "proposal")
	if err != nil {
		return nil, err
	}
	wait, err := optInt(req, "wait_ms", 0, 0, maxProposalWaitMS)
	if err != nil {
		return nil, err
	}
	c, err := s.target(ctx)
	if err != nil {
		return nil, err
	}
	inst := c.target().Record.Instance
	key := s.props.get(inst, id)
	if key == "" {
		return nil, badInput("%q is not a proposal this session made in instance %s", oneLine(id), inst)
	}
	store := proposals.Open(s.dirs.State, inst)
	deadline := time.Now().Add(time.Duration(wait) * time.Millisecond)
	for {
		r, err := store.Get(key)
		if err != nil {
			return nil, err
		}
		if r.State != proposals.Pending || !time.Now().Before(deadline) {
			return proposalResult(r), nil
		}
		t := time.NewTimer(min(proposalPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func proposalResult(r *proposals.Record) map[string]any {
	hunks := make([]map[string]any, len(r.Hunks))
	for i, h := range r.Hunks {
		m := map[string]any{"hunk": i + 1, "state": h.State}
		if h.At > 0 {
			m["line"] = h.At
		}
		hunks[i] = m
	}
	out := map[string]any{"proposal": r.ID, "path": r.Path, "state": r.State, "hunks": hunks}
	if d := r.Decided; d != nil {
		out["decided_by"] = "the student, at " + d.Input
		if r.State == proposals.Stale {
			out["decided_by"] = "nobody: the lines changed first"
		}
	}
	return out
}
