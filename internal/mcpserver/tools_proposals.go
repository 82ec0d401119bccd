package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/provenance"
)

// Proposals: under a task whose agent policy is edits = "propose",
// nvim_buffer_edit hands the change to the student's editor as a proposal
// (the plugin's lua/stem/proposals.lua shows it as a diff labelled with
// this client's name) instead of making it. The student accepts all of
// it, one hunk, or none, in Neovim; nothing a client below full has can
// decide for them (no tool takes Ex, Lua or keys for the editor pane
// unless the student allowed that pane with `stemctl allow`, and a policy
// with edits other than direct caps agents at assist).
//
// The server keeps what it proposed (the lines, the editor's id and a
// token only this server knows, so a restarted editor's new p1 is not
// mistaken for ours) and learns the outcome when proposal_status asks
// the editor, from a watcher that asks about open ones every
// proposalWatch while the session lasts, and by asking once more when
// the session ends. The first time it sees a proposal settled it writes
// the decision to the audit log and calls acceptedHook with the text
// that went in: the student's decision happens in Neovim, so the host
// knows it only from then on (within proposalWatch).

const (
	maxProposals       = 256 // kept per server; settled ones go first
	maxProposalWaitMS  = 60000
	proposalPoll       = 50 * time.Millisecond
	proposalStatusTool = "proposal_status"
	// settleAtEndTimeout bounds asking the editor about open proposals
	// when the session ends.
	settleAtEndTimeout = 3 * time.Second
	// proposalWatch is how often open proposals are asked about without
	// an agent asking: a decision is on record (and in blame) that soon.
	proposalWatch = time.Second
)

type proposal struct {
	id, token string
	instance  string
	path      string // card-relative
	buf       int
	start     int
	end       int
	lines     []string
	hunks     []nvim.Hunk
	created   int64 // audit Seq of the proposal_create entry
	settled   *nvim.ProposalState
}

// proposalBook is the server's own proposals.
type proposalBook struct {
	mu    sync.Mutex
	list  []*proposal
	byKey map[string]*proposal // instance + "\x00" + id
}

func (b *proposalBook) add(p *proposal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byKey == nil {
		b.byKey = map[string]*proposal{}
	}
	for len(b.list) >= maxProposals {
		drop := 0
		for i, q := range b.list {
			if q.settled != nil {
				drop = i
				break
			}
		}
		delete(b.byKey, b.list[drop].instance+"\x00"+b.list[drop].id)
		b.list = append(b.list[:drop], b.list[drop+1:]...)
	}
	b.list = append(b.list, p)
	b.byKey[p.instance+"\x00"+p.id] = p
}

func (b *proposalBook) get(instance, id string) *proposal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[instance+"\x00"+id]
}

// open lists the unsettled proposals made in instance.
func (b *proposalBook) open(instance string) []*proposal {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*proposal
	for _, p := range b.list {
		if p.settled == nil && p.instance == instance {
			out = append(out, p)
		}
	}
	return out
}

// outcome is p's settled state, or nil.
func (b *proposalBook) outcome(p *proposal) *nvim.ProposalState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return p.settled
}

// settle records st as p's outcome once; it reports whether this call did.
func (b *proposalBook) settle(p *proposal, st *nvim.ProposalState) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.settled != nil {
		return false
	}
	p.settled = st
	return true
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("proposal token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
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
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	who := s.requester()
	pr, err := c.nvim.Propose(ctx, buf, start, end, lines, who, token)
	if err != nil {
		return nil, err
	}
	p := &proposal{id: pr.ID, token: token, instance: c.target().Record.Instance, path: cp.Rel, buf: buf,
		start: start, end: end, lines: lines, hunks: pr.Hunks}
	e := s.callEntry(audit.ProposalCreate, "nvim_buffer_edit", linesDigest(lines))
	e.Result = "pending"
	e.Detail = fmt.Sprintf("%s by %s: %s lines %d..%d -> %d lines in %d hunks", p.id, who, cp.Rel, start, end, len(lines), len(pr.Hunks))
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	written, err := s.audit.Append(actx, e)
	cancel()
	if err != nil {
		// Unrecorded, it must not stay before the student: take it back
		// (the call's own outcome entry records the error).
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
		werr := c.nvim.Withdraw(wctx, p.id, token)
		wcancel()
		if werr != nil {
			return nil, fmt.Errorf("proposal %s could not be audited (%v) nor taken back from the student's editor (%v)", p.id, err, werr)
		}
		return nil, fmt.Errorf("proposal %s could not be audited (%v): it was taken back, nothing was proposed", p.id, err)
	}
	p.created = written.Seq
	s.props.add(p)
	hunks := make([]map[string]any, len(pr.Hunks))
	for i, h := range pr.Hunks {
		hunks[i] = map[string]any{"hunk": i + 1, "old_lines": h.Old, "new_lines": h.Count}
	}
	return map[string]any{
		"path": cp.Rel, "buffer": buf, "proposal": p.id, "state": nvim.ProposalPending, "hunks": hunks, "edited": false,
		"note": "The task's agent policy is edits = \"propose\": the buffer is unchanged. The student sees the change in their editor and accepts it, one hunk of it, or rejects it; call proposal_status with this id (and wait_ms) to learn which.",
	}, nil
}

func proposalTools() []toolDef {
	return []toolDef{{
		min: Assist, timeout: (maxProposalWaitMS + 5000) * time.Millisecond,
		tool: mcp.NewTool(proposalStatusTool,
			mcp.WithDescription("The outcome of an edit this session proposed (nvim_buffer_edit under the task's edits = \"propose\" policy): pending, accepted, partially_accepted (some hunks), rejected, or stale (the student changed those lines first; nothing was applied). Waits up to wait_ms for the student to decide. Only this session's proposals."),
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
	p := s.props.get(c.target().Record.Instance, id)
	if p == nil {
		return nil, badInput("%q is not a proposal this session made in instance %s", oneLine(id), c.target().Record.Instance)
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Millisecond)
	for {
		if st := s.props.outcome(p); st != nil {
			return proposalResult(p, st), nil
		}
		st, err := s.checkProposal(ctx, c, p)
		waiting := time.Now().Before(deadline)
		switch {
		case errors.Is(err, nvim.ErrBlocked) && waiting:
			// The student is at a prompt (perhaps reading the proposal):
			// ask again after it.
		case err != nil:
			return nil, err
		case st.Settled() || !waiting:
			return proposalResult(p, st), nil
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

func proposalResult(p *proposal, st *nvim.ProposalState) map[string]any {
	hunks := make([]map[string]any, len(st.Hunks))
	for i, h := range st.Hunks {
		m := map[string]any{"hunk": i + 1, "state": h.State}
		if h.At > 0 {
			m["line"] = h.At
		}
		hunks[i] = m
	}
	out := map[string]any{"proposal": p.id, "path": p.path, "state": st.State, "hunks": hunks}
	if st.Settled() {
		out["decided_by"] = "the student, in their editor"
		if st.State == nvim.ProposalStale {
			out["decided_by"] = "nobody: the lines changed first (or the editor restarted)"
		}
	}
	return out
}

// checkProposal asks the editor about p; the first time p is settled
// its outcome is recorded (decided).
func (s *Server) checkProposal(ctx context.Context, c *conn, p *proposal) (*nvim.ProposalState, error) {
	st, err := c.nvim.ProposalStatus(ctx, p.id, p.token)
	if errors.Is(err, nvim.ErrUnknownProposal) {
		// The editor restarted (or lost the proposal): nothing of it was
		// applied after that, and nothing can be.
		st = &nvim.ProposalState{ID: p.id, State: nvim.ProposalStale}
		for range p.hunks {
			st.Hunks = append(st.Hunks, nvim.HunkState{State: nvim.ProposalStale})
		}
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Settled() {
		return st, nil
	}
	if len(st.Hunks) != len(p.hunks) {
		return nil, fmt.Errorf("proposal %s: the editor reports %d hunks of %d", p.id, len(st.Hunks), len(p.hunks))
	}
	if s.props.settle(p, st) {
		s.decided(ctx, c, p, st)
	}
	return st, nil
}

// watchProposals asks the editor about this server's open proposals
// every proposalWatch until ctx ends, so a decision is recorded even when
// the agent never asks and the session goes on.
func (s *Server) watchProposals(ctx context.Context) {
	t := time.NewTicker(proposalWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := s.current()
		if c == nil {
			continue
		}
		for _, p := range s.props.open(c.target().Record.Instance) {
			pctx, cancel := context.WithTimeout(ctx, proposalWatch)
			_, err := s.checkProposal(pctx, c, p)
			cancel()
			if err != nil && ctx.Err() == nil && !errors.Is(err, nvim.ErrBlocked) {
				s.logf("proposal %s: the editor could not be asked: %v", p.id, err)
			}
		}
	}
}

// settleAtEnd asks the editor once about each proposal still open when
// the session ends, so a decision the agent never asked about is on
// record too; one still open is recorded as open (a later decision is
// then made without this server, and nothing records it).
func (s *Server) settleAtEnd(ctx context.Context) {
	c := s.current()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleAtEndTimeout)
	defer cancel()
	for _, p := range s.props.open(c.target().Record.Instance) {
		st, err := s.checkProposal(ctx, c, p)
		if err == nil && st.Settled() {
			continue
		}
		e := s.callEntry(audit.ProposalDecision, "nvim_buffer_edit", linesDigest(p.lines))
		e.Intent, e.Result = p.created, "open"
		e.Detail = fmt.Sprintf("%s (%s): still open when the proposer's session ended", p.id, p.path)
		if err != nil {
			e.Detail += fmt.Sprintf(" (the editor could not be asked: %v)", err)
		}
		s.appendAudit(ctx, e)
	}
}

// AcceptedChange is text an accepted hunk put in the buffer: Lines went
// in at line Line (1-based) of Path, replacing Old lines.
type AcceptedChange struct {
	Path  string
	Line  int
	Old   int
	Lines []string
}

// acceptedChanges is what the student accepted of p: the host's own copy
// of the proposed lines (never text read back from the editor), placed
// where the editor says each hunk went.
func acceptedChanges(p *proposal, st *nvim.ProposalState) []AcceptedChange {
	var out []AcceptedChange
	for i, h := range st.Hunks {
		if h.State != nvim.ProposalAccepted || i >= len(p.hunks) {
			continue
		}
		ph := p.hunks[i]
		out = append(out, AcceptedChange{Path: p.path, Line: h.At, Old: ph.Old, Lines: p.lines[ph.Start-1 : ph.Start-1+ph.Count]})
	}
	return out
}

// decided records a proposal's outcome the first time this server sees
// it, and passes what was accepted to acceptedHook.
func (s *Server) decided(ctx context.Context, c *conn, p *proposal, st *nvim.ProposalState) {
	changes := acceptedChanges(p, st)
	var parts []string
	for i, h := range st.Hunks {
		parts = append(parts, fmt.Sprintf("%d:%s", i+1, h.State))
	}
	e := s.callEntry(audit.ProposalDecision, "nvim_buffer_edit", linesDigest(p.lines))
	e.Intent, e.Result = p.created, st.State
	by := "the student, in their editor"
	if st.State == nvim.ProposalStale {
		by = "stale: the lines changed before a decision"
	}
	e.Detail = fmt.Sprintf("%s (%s): %s; hunks %s", p.id, p.path, by, strings.Join(parts, " "))
	for _, ch := range changes {
		e.Detail += fmt.Sprintf("; line %d: %d lines %s", ch.Line, len(ch.Lines), linesDigest(ch.Lines))
	}
	s.appendAudit(context.WithoutCancel(ctx), e)
	s.acceptedHook(ctx, c, p, changes)
}

// acceptedHook is where an accepted proposal's resulting text is known on
// the host: the hunks the student accepted, each with the line it went
// to. It runs once per proposal, when proposal_status first sees it
// settled (a proposal nobody asks about again is never seen here; its
// creation is in the audit log all the same). Provenance of agent edits
// records these as the proposer's lines.
func (s *Server) acceptedHook(ctx context.Context, c *conn, p *proposal, changes []AcceptedChange) {
	if len(changes) == 0 {
		return
	}
	if err := s.recordAccepted(ctx, c, p, changes); err != nil {
		s.logf("provenance of accepted proposal %s (%s): %v", p.id, p.path, err)
	}
}

// replacedLine stands for a line an accepted hunk replaced: the host never
// kept the student's old text, and blame only needs it not to match.
const replacedLine = "\x00stem: a line an accepted proposal replaced"

// recordAccepted records the accepted hunks as the proposer's change. The
// buffer is read now, after the student's decision: each hunk's lines must
// be where the editor says they went, or that hunk is left out (the
// student edited it since, and the lines are theirs as far as blame can
// tell). The buffer before is that snapshot with the hunks taken out.
func (s *Server) recordAccepted(ctx context.Context, c *conn, p *proposal, changes []AcceptedChange) error {
	cp, err := resolveCardPath(c.target().Record.CardPath, p.path, false)
	if err != nil {
		return err
	}
	snap, err := c.nvim.Snapshot(ctx, p.buf, provenance.MaxSnapshotBytes)
	if err != nil {
		return err
	}
	if snap.TooLarge {
		return fmt.Errorf("the buffer is too large to record")
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Line < changes[j].Line })
	var kept []AcceptedChange
	next := 1 // the first line a hunk may start at, past the one before
	for _, ch := range changes {
		at := ch.Line - 1
		if ch.Line < next || at+len(ch.Lines) > len(snap.Lines) || !slices.Equal(snap.Lines[at:at+len(ch.Lines)], ch.Lines) {
			s.logf("provenance: accepted hunk at %s:%d is no longer as proposed; not recorded", p.path, ch.Line)
			continue
		}
		kept = append(kept, ch)
		next = ch.Line + len(ch.Lines)
	}
	if len(kept) == 0 {
		return nil
	}
	var before []string
	var hunks []provenance.Hunk
	pos := 0 // next line of the snapshot to copy
	for _, ch := range kept {
		before = append(before, snap.Lines[pos:ch.Line-1]...)
		start := len(before) + 1
		for range ch.Old {
			before = append(before, replacedLine)
		}
		hunks = append(hunks, provenance.Hunk{Start: start, End: start + ch.Old - 1, Lines: ch.Lines})
		pos = ch.Line - 1 + len(ch.Lines)
	}
	before = append(before, snap.Lines[pos:]...)
	_, err = s.recordChange(ctx, c, cp, provenance.Change{Tool: "nvim_buffer_edit", Proposal: p.id, Before: before, Hunks: hunks})
	return err
}
