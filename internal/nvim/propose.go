package nvim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/termtext"
)

// Proposals: under a task whose agent policy is edits = "propose", an edit
// is not made but proposed to the student. The plugin's
// lua/stem/proposals.lua shows it (its :StemAccept/:StemReject only note a
// request); the student decides on the host, which applies an accepted
// change with ApplyHunks and tells the plugin with Settle. These calls
// hand a proposal over and read the editor's state back; none of it is a
// decision. What comes back is the container's: ids, states and numbers
// are checked against fixed forms and bounds before anyone sees them.

// Bounds on a proposal (the plugin enforces the same).
const (
	MaxProposalBytes = 2 * 1024 * 1024
	MaxProposalLines = 100000
	maxHunks         = 500
	maxWhoBytes      = 200
)

// ErrNoPlugin: the editor has no stem proposals plugin (an image built
// before proposals existed, or a Neovim stem did not start).
var ErrNoPlugin = errors.New("the student's Neovim has no stem proposals plugin (lua/stem/proposals.lua): rebuild the images with `make images` and restart the task")

// ErrUnknownProposal: the editor knows no proposal with that id and token
// (it was restarted, or the id is another client's).
var ErrUnknownProposal = errors.New("the student's Neovim has no such proposal (it may have been restarted)")

// Hunk is one change of a proposal: lines Start..Start+Count-1 (1-based)
// of the proposed lines replace Old lines of the buffer, from line
// OldStart (1-based) of the replaced range; with Old == 0 they go after
// line OldStart of the range (0: before it).
type Hunk struct {
	Start    int `json:"start"`
	Count    int `json:"count"`
	Old      int `json:"old"`
	OldStart int `json:"old_start"`
}

// Proposal is what Propose made.
type Proposal struct {
	ID    string `json:"id"`
	Hunks []Hunk `json:"hunks"`
	Tick  int    `json:"tick"`
}

// Proposal states.
const (
	ProposalPending  = "pending"
	ProposalAccepted = "accepted"
	ProposalPartial  = "partially_accepted"
	ProposalRejected = "rejected"
	ProposalStale    = "stale"
)

// HunkState is one hunk's outcome; At is the 1-based line an accepted
// hunk's first new line went to (0 otherwise).
type HunkState struct {
	State string `json:"state"`
	At    int    `json:"at,omitempty"`
}

// ProposalState is what the editor says of a proposal.
type ProposalState struct {
	ID    string      `json:"id"`
	State string      `json:"state"`
	Hunks []HunkState `json:"hunks"`
	Tick  int         `json:"tick"`
	// Request is what the student asked in the editor (:StemAccept,
	// :StemReject): "accept", "reject", or either with ".N" for hunk N;
	// "" for none. A request, never a decision: the container can make it.
	Request string `json:"request,omitempty"`
}

var requestRE = regexp.MustCompile(`^(accept|reject)(\.[0-9]{1,3})?$`)

// Settled reports whether the student has decided every hunk (or the
// editor found them stale).
func (p *ProposalState) Settled() bool { return p.State != ProposalPending }

var proposalID = regexp.MustCompile(`^p[0-9]{1,9}$`)

// luaPropose and luaProposalStatus hand over to the plugin; every value
// is an argument.
const luaPropose = `
local ok, m = pcall(require, 'stem.proposals')
if not ok or type(m) ~= 'table' or type(m.create) ~= 'function' then return {err = 'noplugin'} end
return m.create(...)`

const luaProposalStatus = `
local ok, m = pcall(require, 'stem.proposals')
if not ok or type(m) ~= 'table' or type(m.status) ~= 'function' then return {err = 'noplugin'} end
return m.status(...)`

const luaUnrequest = `
local ok, m = pcall(require, 'stem.proposals')
if not ok or type(m) ~= 'table' or type(m.unrequest) ~= 'function' then return {err = 'noplugin'} end
return m.unrequest(...)`

const luaWithdraw = `
local ok, m = pcall(require, 'stem.proposals')
if not ok or type(m) ~= 'table' or type(m.withdraw) ~= 'function' then return {err = 'noplugin'} end
return m.withdraw(...)`

var (
	fnPropose        = newLuaFunc(luaPropose)
	fnProposalStatus = newLuaFunc(luaProposalStatus)
	fnWithdraw       = newLuaFunc(luaWithdraw)
	fnUnrequest      = newLuaFunc(luaUnrequest)
)

// Propose asks the student to replace lines start..end (1-based,
// inclusive; end == start-1 inserts before start) of buffer buf with
// lines, in the name of who. token ties the proposal to its maker for
// ProposalStatus. The buffer's text is not changed.
func (c *Client) Propose(ctx context.Context, buf, start, end int, lines []string, who, token string) (*Proposal, error) {
	if buf < 1 {
		return nil, fmt.Errorf("nvim propose: buffer number %d: must be 1 or more", buf)
	}
	if len(lines) > MaxProposalLines {
		return nil, fmt.Errorf("nvim propose: %d lines; at most %d", len(lines), MaxProposalLines)
	}
	size := 0
	for i, l := range lines {
		if strings.ContainsAny(l, "\n\r") {
			return nil, fmt.Errorf("nvim propose: line %d contains a line break; pass one string per line", i+1)
		}
		size += len(l) + 1
	}
	if size > MaxProposalBytes {
		return nil, fmt.Errorf("nvim propose: %d bytes; at most %d", size, MaxProposalBytes)
	}
	if len(who) > maxWhoBytes {
		who = who[:maxWhoBytes]
	}
	if lines == nil {
		lines = []string{}
	}
	var res struct {
		Err     string `msgpack:"err"`
		Buftype string `msgpack:"buftype"`
		Total   int    `msgpack:"total"`
		ID      string `msgpack:"id"`
		Tick    int    `msgpack:"tick"`
		Hunks   []struct {
			SB  int `msgpack:"sb"`
			CB  int `msgpack:"cb"`
			Old int `msgpack:"old"`
			SA  int `msgpack:"sa"`
		} `msgpack:"hunks"`
	}
	err := c.call(ctx, "propose", guardHang, false, func(v *gonvim.Nvim) error {
		return execLua(v, fnPropose, &res, buf, start, end, lines, who, token)
	})
	if err != nil {
		return nil, err
	}
	ref := Buf(buf).String()
	switch res.Err {
	case "":
	case "noplugin":
		return nil, fmt.Errorf("nvim propose: %w", ErrNoPlugin)
	case "buftype":
		return nil, fmt.Errorf("nvim propose: %s has buftype %q: %w", ref, clipText(res.Buftype), ErrBufType)
	case "nomodifiable":
		return nil, fmt.Errorf("nvim propose: %s is not modifiable ('nomodifiable')", ref)
	case "range":
		return nil, fmt.Errorf("nvim propose: %s has %d lines; lines %d..%d cannot be replaced", ref, res.Total, start, end)
	case "nochange":
		return nil, fmt.Errorf("nvim propose: the proposed lines are the same as lines %d..%d: nothing to propose", start, end)
	case "toomany":
		return nil, fmt.Errorf("nvim propose: the student has too many open proposals; wait for them to decide")
	default:
		return nil, fmt.Errorf("nvim propose: %w", mapErr(clipText(res.Err), ref))
	}
	if !proposalID.MatchString(res.ID) {
		return nil, fmt.Errorf("nvim propose: the editor answered with a malformed proposal id %q", clipText(res.ID))
	}
	if len(res.Hunks) == 0 || len(res.Hunks) > maxHunks {
		return nil, fmt.Errorf("nvim propose: the editor answered with %d hunks", len(res.Hunks))
	}
	p := &Proposal{ID: res.ID, Tick: res.Tick}
	lastOld := 0 // hunks are in order and do not overlap in the old lines
	for _, h := range res.Hunks {
		// Each hunk must lie inside what was proposed and replaced.
		old := end - start + 1
		if h.CB < 0 || h.Old < 0 || h.SB < 1 || h.SB+h.CB-1 > len(lines) || h.Old > old ||
			h.SA < 0 || h.SA+h.Old-1 > old || (h.Old > 0 && h.SA < 1) || h.SA < lastOld {
			return nil, fmt.Errorf("nvim propose: the editor answered with a hunk outside the proposal (%d+%d of %d lines, old %d+%d of %d)", h.SB, h.CB, len(lines), h.SA, h.Old, old)
		}
		lastOld = h.SA + h.Old
		p.Hunks = append(p.Hunks, Hunk{Start: h.SB, Count: h.CB, Old: h.Old, OldStart: h.SA})
	}
	return p, nil
}

// ProposalStatus reads a proposal's outcome. Asking checks it too: a
// pending hunk whose lines changed is marked stale.
func (c *Client) ProposalStatus(ctx context.Context, id, token string) (*ProposalState, error) {
	if !proposalID.MatchString(id) {
		return nil, fmt.Errorf("nvim proposal status: %q is not a proposal id (p1, p2, ...)", clipText(id))
	}
	var res struct {
		Err     string `msgpack:"err"`
		ID      string `msgpack:"id"`
		State   string `msgpack:"state"`
		Tick    int    `msgpack:"tick"`
		Request string `msgpack:"request"`
		Hunks   []struct {
			State string `msgpack:"state"`
			At    int    `msgpack:"at"`
		} `msgpack:"hunks"`
	}
	err := c.call(ctx, "proposal status", guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fnProposalStatus, &res, id, token)
	})
	if err != nil {
		return nil, err
	}
	switch res.Err {
	case "":
	case "noplugin":
		return nil, fmt.Errorf("nvim proposal status: %w", ErrNoPlugin)
	case "unknown":
		return nil, fmt.Errorf("nvim proposal status %s: %w", id, ErrUnknownProposal)
	default:
		return nil, fmt.Errorf("nvim proposal status: %s", clipText(res.Err))
	}
	if res.ID != id || len(res.Hunks) == 0 || len(res.Hunks) > maxHunks {
		return nil, fmt.Errorf("nvim proposal status %s: the editor answered for %q with %d hunks", id, clipText(res.ID), len(res.Hunks))
	}
	st := &ProposalState{ID: id, State: res.State, Tick: res.Tick}
	if requestRE.MatchString(res.Request) {
		st.Request = res.Request
	}
	var acc, stale, pending int
	for _, h := range res.Hunks {
		switch h.State {
		case ProposalAccepted:
			acc++
			if h.At < 0 {
				return nil, fmt.Errorf("nvim proposal status %s: an accepted hunk at line %d", id, h.At)
			}
		case ProposalStale:
			stale++
			h.At = 0
		case ProposalPending:
			pending++
			h.At = 0
		case ProposalRejected:
			h.At = 0
		default:
			return nil, fmt.Errorf("nvim proposal status %s: a hunk in state %q", id, clipText(h.State))
		}
		st.Hunks = append(st.Hunks, HunkState{State: h.State, At: h.At})
	}
	// The overall state follows from the hunks; the editor's own word
	// for it must agree.
	want := ProposalRejected
	switch {
	case pending > 0:
		want = ProposalPending
	case acc == len(res.Hunks):
		want = ProposalAccepted
	case acc > 0:
		want = ProposalPartial
	case stale > 0:
		want = ProposalStale
	}
	if res.State != want {
		return nil, fmt.Errorf("nvim proposal status %s: the editor says %q of hunks that make it %q", id, clipText(res.State), want)
	}
	return st, nil
}

// Withdraw takes back a proposal (whatever its state) so that the student
// no longer sees it or can accept it: for a proposal its maker could not
// put on record. A hunk already accepted stays in the buffer.
func (c *Client) Withdraw(ctx context.Context, id, token string) error {
	if !proposalID.MatchString(id) {
		return fmt.Errorf("nvim withdraw: %q is not a proposal id", clipText(id))
	}
	return c.proposalCall(ctx, "withdraw", "withdraw", id, fnWithdraw, id, token)
}

// proposalCall runs a plugin function on proposal id that answers only
// {err = ...}, and names its failure after verb.
func (c *Client) proposalCall(ctx context.Context, op, verb, id string, fn luaFunc, args ...any) error {
	var res struct {
		Err string `msgpack:"err"`
	}
	err := c.call(ctx, op, guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fn, &res, args...)
	})
	if err != nil {
		return err
	}
	switch res.Err {
	case "":
		return nil
	case "noplugin":
		return fmt.Errorf("nvim %s: %w", verb, ErrNoPlugin)
	case "unknown":
		return fmt.Errorf("nvim %s %s: %w", verb, id, ErrUnknownProposal)
	}
	return fmt.Errorf("nvim %s %s: %s", verb, id, clipText(res.Err))
}

// clipText is container text for an error message: short and inert.
func clipText(s string) string { return makeText(termtext.Clip(s, 80)).S }

// Unrequest clears the student's request on proposal id once the host has
// asked them about it.
func (c *Client) Unrequest(ctx context.Context, id, token string) error {
	if !proposalID.MatchString(id) {
		return fmt.Errorf("nvim unrequest: %q is not a proposal id", clipText(id))
	}
	var res struct {
		Err string `msgpack:"err"`
	}
	err := c.call(ctx, "unrequest", guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fnUnrequest, &res, id, token)
	})
	if err != nil {
		return err
	}
	if res.Err != "" {
		return fmt.Errorf("nvim unrequest %s: %s", id, clipText(res.Err))
	}
	return nil
}
