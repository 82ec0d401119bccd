package nvim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// Proposals against a real Neovim with the editor plugin on its
// runtimepath (as the images install it). The student's :StemAccept /
// :StemReject (nvim_input: keys as from their terminal) only ask; the
// host applies a decision with ApplyHunks (or tells it with Settle).

var sample = []string{"int main(void)", "{", "    int a = 1;", "    int b = 2;", "    return a + b;", "}"}

type proposalFixture struct {
	t    *testing.T
	n    *nvimtest.Nvim
	c    *Client
	buf  int
	path string
	// made keeps what the host keeps of each proposal, by token.
	made map[string]madeProposal
}

type madeProposal struct {
	p      *Proposal
	before []string
	start  int
	lines  []string
}

func proposeFixture(t *testing.T) *proposalFixture {
	n, c := start(t, nvimtest.Options{Plugin: true})
	p := writeFile(t, n.Dir, "main.c", strings.Join(sample, "\n")+"\n")
	return &proposalFixture{t: t, n: n, c: c, buf: edit(t, n, p), path: p, made: map[string]madeProposal{}}
}

func (f *proposalFixture) propose(start, end int, lines []string, who, token string) *Proposal {
	f.t.Helper()
	before := f.lines()
	p, err := f.c.Propose(testCtx(f.t), f.buf, start, end, lines, who, token)
	if err != nil {
		f.t.Fatalf("Propose: %v", err)
	}
	f.made[token] = madeProposal{p, before, start, lines}
	return p
}

// host accepts the hunks of the proposal with token (all when none is
// given) as the host does: from its own copy of the old lines.
func (f *proposalFixture) host(token string, hunks ...int) *Applied {
	f.t.Helper()
	m := f.made[token]
	var es []HunkEdit
	for i, h := range m.p.Hunks {
		e := HunkEdit{New: m.lines[h.Start-1 : h.Start-1+h.Count], Settle: ProposalPending}
		if h.Old > 0 {
			e.Row = m.start - 1 + h.OldStart - 1
			e.Old = m.before[e.Row : e.Row+h.Old]
		} else if after := m.start - 1 + h.OldStart; after >= 1 {
			e.Row, e.Ctx = after-1, m.before[after-1]
		} else {
			e.Before, e.Ctx = true, m.before[0]
		}
		if len(hunks) == 0 || slices.Contains(hunks, i+1) {
			e.Apply, e.Settle = true, ProposalAccepted
		}
		es = append(es, e)
	}
	a, err := f.c.ApplyHunks(testCtx(f.t), f.path, m.p.ID, token, es, 1<<22)
	if err != nil {
		f.t.Fatalf("ApplyHunks: %v", err)
	}
	return a
}

// request is what the student asked of proposal id in the editor.
func (f *proposalFixture) request(id string) string {
	f.t.Helper()
	var info []struct {
		ID      string `msgpack:"id"`
		Request string `msgpack:"request"`
	}
	f.n.Lua(f.t, &info, `return require('stem.proposals').info()`)
	for _, p := range info {
		if p.ID == id {
			return p.Request
		}
	}
	return ""
}

func (f *proposalFixture) status(id, token string) *ProposalState {
	f.t.Helper()
	st, err := f.c.ProposalStatus(testCtx(f.t), id, token)
	if err != nil {
		f.t.Fatalf("ProposalStatus %s: %v", id, err)
	}
	return st
}

// student types an Ex command into the editor and waits for it to run.
func (f *proposalFixture) student(cmd string) {
	f.t.Helper()
	f.n.Input(f.t, "<Esc>:"+cmd+"<CR>")
	f.n.WaitMode(f.t, func(m string, blocking bool) bool { return m == "n" && !blocking })
}

func (f *proposalFixture) lines() []string { return bufLines(f.t, f.n, f.buf) }

// shownText is every virtual line stem's proposals show in the buffer.
func (f *proposalFixture) shownText() []string {
	f.t.Helper()
	var out []string
	f.n.Lua(f.t, &out, `
local ns = vim.api.nvim_create_namespace('stem-proposal-view')
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(..., ns, 0, -1, {details = true})) do
  for _, vl in ipairs(m[4].virt_lines or {}) do
    local s = ''
    for _, chunk in ipairs(vl) do s = s .. chunk[1] end
    out[#out + 1] = s
  end
end
return out`, f.buf)
	return out
}

func hunkStates(st *ProposalState) []string {
	var out []string
	for _, h := range st.Hunks {
		out = append(out, h.State)
	}
	return out
}

func TestProposeLeavesBufferAndShowsDiff(t *testing.T) {
	f := proposeFixture(t)
	var tick0 int
	f.n.Lua(t, &tick0, `return vim.api.nvim_buf_get_changedtick(...)`, f.buf)
	p := f.propose(3, 4, []string{"    int a = 10;", "    int b = 2;"}, "agent claude", "tok")
	if p.ID != "p1" || len(p.Hunks) != 1 || p.Hunks[0] != (Hunk{Start: 1, Count: 1, Old: 1, OldStart: 1}) {
		t.Fatalf("proposal %+v", p)
	}
	var tick1 int
	var modified bool
	f.n.Lua(t, &tick1, `return vim.api.nvim_buf_get_changedtick(...)`, f.buf)
	f.n.Lua(t, &modified, `return vim.bo[...].modified`, f.buf)
	if !slices.Equal(f.lines(), sample) || tick1 != tick0 || modified {
		t.Fatalf("the buffer changed: %q tick %d→%d modified %v", f.lines(), tick0, tick1, modified)
	}
	shown := strings.Join(f.shownText(), "\n")
	for _, want := range []string{"proposal p1.1 of 1 by agent claude", "+     int a = 10;", "decide on the host: stemctl proposals"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the editor does not show %q:\n%s", want, shown)
		}
	}
	if st := f.status(p.ID, "tok"); st.State != ProposalPending {
		t.Fatalf("status %+v", st)
	}
}

func TestProposeAcceptAll(t *testing.T) {
	f := proposeFixture(t)
	p := f.propose(3, 5, []string{"    int a = 10;", "    int b = 2;", "    return a * b;"}, "agent a", "tok")
	if len(p.Hunks) != 2 {
		t.Fatalf("want 2 hunks, got %+v", p.Hunks)
	}
	// The student's :StemAccept asks and changes nothing.
	f.student("StemAccept p1")
	if got := f.lines(); !slices.Equal(got, sample) || f.request(p.ID) != "accept" {
		t.Fatalf("after :StemAccept: %q, request %q", got, f.request(p.ID))
	}
	a := f.host("tok")
	want := []string{"int main(void)", "{", "    int a = 10;", "    int b = 2;", "    return a * b;", "}"}
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("after the host's accept: %q", got)
	}
	if !slices.Equal(a.Rows, []int{2, 4}) || !slices.Equal(a.Before, sample) {
		t.Fatalf("applied %+v", a)
	}
	st := f.status(p.ID, "tok")
	if st.State != ProposalAccepted {
		t.Fatalf("status %+v", st)
	}
	if len(f.shownText()) != 0 {
		t.Fatalf("a decided proposal is still shown: %q", f.shownText())
	}
}

func TestProposeAcceptOneHunk(t *testing.T) {
	f := proposeFixture(t)
	p := f.propose(3, 5, []string{"    int a = 10;", "    int b = 2;", "    return a * b;"}, "agent a", "tok")
	f.student("StemAccept p1.2")
	if f.request(p.ID) != "accept.2" || !slices.Equal(f.lines(), sample) {
		t.Fatalf("after :StemAccept p1.2: request %q, %q", f.request(p.ID), f.lines())
	}
	f.host("tok", 2)
	want := slices.Clone(sample)
	want[4] = "    return a * b;"
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("after the host's accept of hunk 2: %q", got)
	}
	if st := f.status(p.ID, "tok"); st.State != ProposalPending || !slices.Equal(hunkStates(st), []string{"pending", "accepted"}) {
		t.Fatalf("status %+v", st)
	}
	// The key on the hunk under the cursor asks to reject it; the host
	// tells the editor it is.
	f.n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {3, 0})`)
	f.n.Input(t, `\pR`)
	f.n.WaitMode(t, func(m string, b bool) bool { return m == "n" && !b })
	if f.request(p.ID) != "reject.1" {
		t.Fatalf("request %q", f.request(p.ID))
	}
	if err := f.c.Settle(testCtx(t), p.ID, "tok", []string{ProposalRejected, ProposalAccepted}); err != nil {
		t.Fatal(err)
	}
	st := f.status(p.ID, "tok")
	if st.State != ProposalPartial || !slices.Equal(hunkStates(st), []string{"rejected", "accepted"}) {
		t.Fatalf("status %+v", st)
	}
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("rejecting changed the buffer: %q", got)
	}
}

func TestProposeReject(t *testing.T) {
	f := proposeFixture(t)
	p := f.propose(3, 3, []string{"    int a = 10;"}, "agent a", "tok")
	f.student("StemReject")
	if f.request(p.ID) != "" {
		t.Fatal(":StemReject with the cursor away from the proposal asked about it")
	}
	f.n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {3, 0})`)
	f.student("StemReject")
	if st := f.status(p.ID, "tok"); st.State != ProposalPending || f.request(p.ID) != "reject" {
		t.Fatalf(":StemReject decided: %+v", st)
	}
	if err := f.c.Settle(testCtx(t), p.ID, "tok", []string{ProposalRejected}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(p.ID, "tok"); st.State != ProposalRejected {
		t.Fatalf("status %+v", st)
	}
	if !slices.Equal(f.lines(), sample) {
		t.Fatalf("the buffer changed: %q", f.lines())
	}
	// A decided proposal stays decided.
	if err := f.c.Settle(testCtx(t), p.ID, "tok", []string{ProposalAccepted}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(p.ID, "tok"); !slices.Equal(f.lines(), sample) || st.State != ProposalRejected {
		t.Fatalf("accepting a rejected proposal changed the buffer: %q", f.lines())
	}
}

func TestProposeTwoProposers(t *testing.T) {
	f := proposeFixture(t)
	a := f.propose(3, 3, []string{"    int a = 10;"}, "agent one", "ta")
	b := f.propose(3, 4, []string{"    long a = 1;", "    long b = 2;"}, "teacher two", "tb")
	shown := strings.Join(f.shownText(), "\n")
	if !strings.Contains(shown, "by agent one") || !strings.Contains(shown, "by teacher two") {
		t.Fatalf("proposers not labelled:\n%s", shown)
	}
	// Each proposer sees only its own proposal.
	if _, err := f.c.ProposalStatus(testCtx(t), b.ID, "ta"); !errors.Is(err, ErrUnknownProposal) {
		t.Fatalf("one proposer read the other's proposal: %v", err)
	}
	f.host("tb")
	if ap := f.host("ta"); !slices.Equal(ap.Rows, []int{-1}) {
		t.Fatalf("the overtaken proposal applied at %v", ap.Rows)
	}
	want := []string{"int main(void)", "{", "    long a = 1;", "    long b = 2;", "    return a + b;", "}"}
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("buffer %q, want %q", got, want)
	}
	if st := f.status(a.ID, "ta"); st.State != ProposalStale {
		t.Fatalf("the overtaken proposal is %+v, want stale", st)
	}
	if st := f.status(b.ID, "tb"); st.State != ProposalAccepted {
		t.Fatalf("status %+v", st)
	}
}

func TestProposeReanchoredAndStale(t *testing.T) {
	f := proposeFixture(t)
	moved := f.propose(5, 5, []string{"    return a - b;"}, "agent a", "t1")
	gone := f.propose(3, 3, []string{"    int a = 3;"}, "agent a", "t2")
	f.propose(6, 5, []string{"    /* done */"}, "agent a", "t3")
	// The student adds two lines at the top and rewrites line 3.
	f.n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {1, 0})`)
	f.n.Input(t, "Otop 1<Esc>otop 2<Esc>")
	f.n.WaitMode(t, func(m string, b bool) bool { return m == "n" && !b })
	f.n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {5, 0})`)
	f.n.Input(t, "ccint a = 4;<Esc>")
	f.n.WaitMode(t, func(m string, b bool) bool { return m == "n" && !b })
	// The editor stops offering it as soon as the line changed.
	if shown := strings.Join(f.shownText(), "\n"); strings.Contains(shown, "proposal "+gone.ID+".1") || !strings.Contains(shown, "proposal "+moved.ID+".1") {
		t.Fatalf("after the student's edit the editor shows:\n%s", shown)
	}
	if st := f.status(gone.ID, "t2"); st.State != ProposalStale {
		t.Fatalf("a proposal whose line changed is %+v, want stale", st)
	}
	before := f.lines()
	f.host("t2")
	if !slices.Equal(f.lines(), before) {
		t.Fatalf("a stale proposal was applied: %q", f.lines())
	}
	// An insertion is anchored on the line it follows: accepted first, it
	// goes after "return"; the replacement of that line still applies.
	f.host("t3")
	mv := f.host("t1")
	want := []string{"top 1", "top 2", "int main(void)", "{", before[4], "    int b = 2;", "    return a - b;", "    /* done */", "}"}
	if !strings.HasSuffix(before[4], "int a = 4;") {
		t.Fatalf("the student's edit did not land: %q", before)
	}
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("buffer %q, want %q", got, want)
	}
	if st := f.status(moved.ID, "t1"); st.State != ProposalAccepted || !slices.Equal(mv.Rows, []int{6}) {
		t.Fatalf("re-anchored proposal %+v at %v, want accepted at line 7", st, mv.Rows)
	}
}

// TestProposeHostileText: proposal text and the proposer's name are shown
// inert (no escape sequence reaches the screen, Ex-looking text is never
// run, a 1 MB line is shown cut) and, when accepted, land byte for byte.
// The control runs the same Ex text as a command and sees the canary.
func TestProposeHostileText(t *testing.T) {
	f := proposeFixture(t)
	canary := filepath.Join(f.n.Dir, "canary")
	ex := "call writefile(['x'], '" + canary + "')"
	hostile := []string{
		"\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[31mred",
		":" + ex,
		"<Cmd>" + ex + "<CR>",
		"`=writefile(['x'], '" + canary + "')`",
		"\x00nul \x7f del \u009b csi",
		strings.Repeat("A", 1<<20),
	}
	p := f.propose(3, 3, hostile, "agent \x1b[2Jevil\x07", "tok")
	f.n.Input(t, `<Esc>:StemProposals<CR>`)
	f.n.Input(t, `<Esc>`)
	f.n.Lua(t, nil, `vim.api.nvim_win_set_cursor(0, {3, 0})`)
	f.n.WaitMode(t, func(m string, b bool) bool { return m == "n" && !b })
	shown := f.shownText()
	all := strings.Join(shown, "\n")
	if strings.ContainsAny(all, "\x1b\x07\x00\x7f") || strings.Contains(all, "\u009b") {
		t.Fatalf("control characters reach the screen: %q", all[:min(len(all), 300)])
	}
	if !strings.Contains(all, "^[]52;c;") || !strings.Contains(all, "by agent ^[[2Jevil^G") {
		t.Fatalf("the escapes are not shown as text: %q", all[:min(len(all), 300)])
	}
	for _, l := range shown {
		if len(l) > 1000 {
			t.Fatalf("a shown line of %d bytes", len(l))
		}
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("showing the proposal ran its text: %v", err)
	}
	f.student("StemAccept " + p.ID)
	if !slices.Equal(f.lines(), sample) {
		t.Fatal(":StemAccept changed the buffer")
	}
	f.host("tok")
	want := slices.Concat(sample[:2], hostile, sample[3:])
	// Neovim keeps a NUL in a line as "\n" internally and returns it as NUL.
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("accepted text differs (%d lines, want %d)", len(got), len(want))
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("accepting the proposal ran its text: %v", err)
	}
	// Control: the same text as an Ex command does write the canary.
	f.n.Exec(t, ex)
	if _, err := os.Stat(canary); err != nil {
		t.Fatalf("control: the Ex text did not run: %v", err)
	}
}

// TestProposeValidatesEditor: what the editor answers is the container's;
// a replaced plugin that lies is refused, never passed on.
func TestProposeValidatesEditor(t *testing.T) {
	f := proposeFixture(t)
	for _, c := range []struct{ name, create, status string }{
		{"malformed id", `return {id = 'p1; rm -rf', hunks = {{sb = 1, cb = 1, old = 1}}}`, ``},
		{"hunk outside", `return {id = 'p1', hunks = {{sb = 1, cb = 99, old = 1, sa = 1}}}`, ``},
		{"old lines outside", `return {id = 'p1', hunks = {{sb = 1, cb = 1, old = 1, sa = 5}}}`, ``},
		{"hunks out of order", `return {id = 'p1', hunks = {{sb = 1, cb = 0, old = 1, sa = 1}, {sb = 1, cb = 1, old = 0, sa = 0}}}`, ``},
		{"too many hunks", `local h = {} for i = 1, 600 do h[i] = {sb = 1, cb = 0, old = 0} end return {id = 'p1', hunks = h}`, ``},
		{"bad state", `return {id = 'p1', hunks = {{sb = 1, cb = 1, old = 1, sa = 1}}}`, `return {id = 'p1', state = 'accepted', hunks = {{state = 'yes', at = 1}}}`},
		{"state disagrees", `return {id = 'p1', hunks = {{sb = 1, cb = 1, old = 1, sa = 1}}}`, `return {id = 'p1', state = 'accepted', hunks = {{state = 'rejected'}}}`},
		{"other id", `return {id = 'p1', hunks = {{sb = 1, cb = 1, old = 1, sa = 1}}}`, `return {id = 'p2', state = 'rejected', hunks = {{state = 'rejected'}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.n.Lua(t, nil, `package.loaded['stem.proposals'] = {
  create = loadstring(select(1, ...)), status = loadstring(select(2, ...)) }`, c.create, c.status)
			_, err := f.c.Propose(testCtx(t), f.buf, 3, 3, []string{"x"}, "a", "t")
			if c.status == "" {
				if err == nil {
					t.Fatal("a lying editor's proposal was accepted")
				}
				return
			}
			if err != nil {
				t.Fatalf("Propose: %v", err)
			}
			if st, err := f.c.ProposalStatus(testCtx(t), "p1", "t"); err == nil {
				t.Fatalf("a lying editor's status was believed: %+v", st)
			}
		})
	}
}

func TestProposeWithoutPlugin(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	buf := edit(t, n, writeFile(t, n.Dir, "x.c", "a\n"))
	if _, err := c.Propose(testCtx(t), buf, 1, 1, []string{"b"}, "a", "t"); !errors.Is(err, ErrNoPlugin) {
		t.Fatalf("want ErrNoPlugin, got %v", err)
	}
}

// TestProposalShown holds the plugin's own display cleaning to its word
// (Neovim 0.7 also shows control characters in virtual text as ^X; the
// plugin does not rely on that).
func TestProposalShown(t *testing.T) {
	n := nvimtest.Start(t, nvimtest.Options{Plugin: true, NoUI: true})
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"a\x1b[31mb\x07\x00\x7f", 100, "a^[[31mb^G^@^?"},
		{"csi \u009b x", 100, "csi <9b> x"},
		{"rtl \u202e evil \u2066", 100, "rtl <bidi> evil <bidi>"},
		{"ééé", 3, "é…"},
		{strings.Repeat("A", 1<<20), 10, "AAAAAAAAAA…"},
	} {
		var got string
		n.Lua(t, &got, `return require('stem.proposals').shown(...)`, c.in, c.max)
		if got != c.want {
			t.Errorf("shown(%q, %d) = %q, want %q", c.in[:min(len(c.in), 20)], c.max, got, c.want)
		}
	}
}

// TestProposalCommandsAtStartup: the session's editor has the commands
// and keys from its start (plugin/stem.lua → stem.setup), before any
// proposal; another Neovim in the container does not.
func TestProposalCommandsAtStartup(t *testing.T) {
	for _, session := range []bool{true, false} {
		n := nvimtest.Start(t, nvimtest.Options{Plugin: true, Session: session})
		want := []any{int64(2), int64(2), int64(2), true}
		if !session {
			want = []any{int64(0), int64(0), int64(0), false}
		}
		// The startup runs at VimEnter: wait for it (or, outside the
		// session, for VimEnter to have passed).
		var got []any
		deadline := time.Now().Add(5 * time.Second)
		for {
			var entered bool
			got = nil
			n.Lua(t, &got, `return {vim.fn.exists(':StemAccept'), vim.fn.exists(':StemReject'), vim.fn.exists(':StemProposals'), vim.fn.maparg('\\pa', 'n') ~= ''}`)
			n.Lua(t, &entered, `return vim.v.vim_did_enter == 1`)
			if entered && (!session || fmt.Sprint(got) == fmt.Sprint(want)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("session %v: commands and key %v, want %v", session, got, want)
		}
	}
}

func TestProposeDeleteAndInsertAtTop(t *testing.T) {
	f := proposeFixture(t)
	f.propose(4, 4, nil, "agent a", "t1")
	top := f.propose(1, 0, []string{"#include <stdio.h>"}, "agent a", "t2")
	if !strings.Contains(strings.Join(f.shownText(), "\n"), "(the marked lines are deleted)") {
		t.Fatalf("the deletion is not shown: %q", f.shownText())
	}
	f.host("t1")
	f.host("t2")
	want := slices.Concat([]string{"#include <stdio.h>"}, sample[:3], sample[4:])
	if got := f.lines(); !slices.Equal(got, want) {
		t.Fatalf("buffer %q, want %q", got, want)
	}
	if st := f.status(top.ID, "t2"); st.State != ProposalAccepted {
		t.Fatalf("status %+v", st)
	}
	// A proposal on a buffer that is gone is stale, never applied.
	gone := f.propose(2, 2, []string{"{ /* x */"}, "agent a", "t3")
	f.n.Lua(t, nil, `vim.cmd('enew!'); vim.api.nvim_buf_delete(..., {force = true})`, f.buf)
	if st := f.status(gone.ID, "t3"); st.State != ProposalStale {
		t.Fatalf("proposal on a deleted buffer: %+v", st)
	}
}

func TestProposalWithdraw(t *testing.T) {
	f := proposeFixture(t)
	p := f.propose(3, 3, []string{"    int a = 10;"}, "agent a", "tok")
	if err := f.c.Withdraw(testCtx(t), p.ID, "other"); !errors.Is(err, ErrUnknownProposal) {
		t.Fatalf("withdrawn with another's token: %v", err)
	}
	if err := f.c.Withdraw(testCtx(t), p.ID, "tok"); err != nil {
		t.Fatal(err)
	}
	if len(f.shownText()) != 0 {
		t.Fatalf("a withdrawn proposal is still shown: %q", f.shownText())
	}
	f.student("StemAccept " + p.ID)
	if !slices.Equal(f.lines(), sample) || f.request(p.ID) != "" {
		t.Fatalf("a withdrawn proposal was asked about or applied: %q", f.lines())
	}
	if _, err := f.c.ProposalStatus(testCtx(t), p.ID, "tok"); !errors.Is(err, ErrUnknownProposal) {
		t.Fatalf("status of a withdrawn proposal: %v", err)
	}
}
