package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/termtext"
)

// The student's :StemAccept / :StemReject in the editor is a request,
// which code in the container can make as well. While the proposer's
// session lasts, this server looks for requests on its open proposals and
// puts each to the student as a question in the host decision spool
// (kind "proposal"); only an answer from a host input (stemctl attach's
// host line) applies it, through the same host path as `stemctl
// proposals accept`, recorded with that input. Without the session, or
// with nobody on the host to answer, the student runs stemctl proposals.

// requestWatch is how often the editor is asked for requests.
const requestWatch = time.Second

// proposalAskTTL bounds how long a proposal question stays open.
const proposalAskTTL = 5 * time.Minute

// mine lists this server's proposals in instance: id -> key.
func (b *proposalBook) mine(instance string) map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for _, k := range b.order {
		inst, id, _ := strings.Cut(k, "\x00")
		if inst == instance {
			out[id] = b.byKey[k]
		}
	}
	return out
}

// asking marks key as put to the student; it reports false when it is
// already.
func (b *proposalBook) asking(key string, on bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.asked == nil {
		b.asked = map[string]bool{}
	}
	if on && b.asked[key] {
		return false
	}
	b.asked[key] = on
	return true
}

func (s *Server) watchRequests(ctx context.Context) {
	t := time.NewTicker(requestWatch)
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
		inst := c.target().Record.Instance
		store := proposals.Open(s.dirs.State, inst)
		for id, key := range s.props.mine(inst) {
			r, err := store.Get(key)
			if err != nil || r.State != proposals.Pending {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, requestWatch)
			st, err := c.nvim.ProposalStatus(pctx, id, key)
			cancel()
			if err != nil || st.Request == "" || !s.props.asking(key, true) {
				continue
			}
			go s.askProposal(ctx, c, r, st.Request)
		}
	}
}

// askProposal puts the editor's request on r to the student on the host
// and, on their yes, applies it.
func (s *Server) askProposal(ctx context.Context, c *conn, r *proposals.Record, request string) {
	defer s.props.asking(r.Key, false)
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestWatch)
		c.nvim.Unrequest(uctx, r.ID, r.Key)
		cancel()
	}()
	verb, hunk, _ := strings.Cut(request, ".")
	var hunks []int
	what := fmt.Sprintf("%d hunk(s)", len(r.Hunks))
	if hunk != "" {
		n, _ := strconv.Atoi(hunk)
		hunks, what = []int{n}, fmt.Sprintf("hunk %d of %d", n, len(r.Hunks))
	}
	spool, err := decision.Open(s.dirs.State, r.Instance)
	if err != nil {
		s.logf("proposal %s: the student cannot be asked: %v", r.ID, err)
		return
	}
	q := decision.Question{Kind: "proposal", From: termtext.OneLine(r.From, 60),
		Text:    termtext.OneLine(fmt.Sprintf("%s proposal %s by %s: %s, %s (stemctl proposals show %s)", verb, r.ID, r.From, r.Path, what, r.ID), 300),
		Choices: []decision.Choice{decision.Yes, decision.No}, Expires: time.Now().Add(proposalAskTTL)}
	ans, err := spool.Ask(ctx, q)
	switch {
	case errors.Is(err, decision.ErrNobodyToAsk):
		return
	case err != nil:
		s.logf("proposal %s: %v", r.ID, err)
		return
	case ans.Choice != decision.Yes:
		return
	}
	// Read again: it may have been decided on the host meanwhile.
	store := proposals.Open(s.dirs.State, r.Instance)
	cur, err := store.Get(r.Key)
	if err != nil {
		s.logf("proposal %s: %v", r.ID, err)
		return
	}
	t := c.target()
	sock := t.Dir.Nvim()
	d := proposals.Decide{Accept: verb == "accept", Hunks: hunks, Input: ans.Input, Instance: t.Record, StateDir: s.dirs.State, Audit: s.audit,
		Dial: func(ctx context.Context) (*nvim.Client, error) { return nvim.Dial(ctx, sock, nvim.Options{}) }}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := store.Decide(dctx, cur, d); err != nil {
		s.logf("proposal %s: the student's yes at %s could not be applied: %v", r.ID, ans.Input, err)
	}
}
