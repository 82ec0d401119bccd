package gate_test

// Restrictions of a grant checked through the real sshd and ssh: the
// instance list against a bare `mcp` that follows the student's selection,
// the audit entry of an effectful call at assist level, and from=.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/testenv"
)

// notAllowed is what the server says when the selection points at an
// instance outside the grant.
const notAllowed = "is not among the instances this access grant allows"

// mark types `echo WORD` in an instance's shell pane and waits until the
// pane shows it, so a capture can tell which instance it came from.
func mark(t *testing.T, in *testenv.Instance, word string) {
	t.Helper()
	in.Tmux(t, "send-keys", "-t", "stem:shell", "echo "+word, "Enter")
	waitFor(t, func() bool {
		return strings.Contains(in.Tmux(t, "capture-pane", "-p", "-t", "stem:shell"), "\n"+word+"\n")
	})
}

// callText calls a tool and returns its result's text and whether it was a
// tool error. A transport error fails the test.
func callText(t *testing.T, ctx context.Context, c *client.Client, tool string, args map[string]any) (string, bool) {
	t.Helper()
	text, code := callCode(t, ctx, c, tool, args)
	return text, code != ""
}

// callCode is callText with the error's code from the structured
// content, as a client reads it ("" for a success).
func callCode(t *testing.T, ctx context.Context, c *client.Client, tool string, args map[string]any) (string, errcode.Code) {
	t.Helper()
	call := mcp.CallToolRequest{}
	call.Params.Name = tool
	call.Params.Arguments = args
	r, err := c.CallTool(ctx, call)
	if err != nil {
		t.Fatalf("%s over ssh: %v", tool, err)
	}
	text, _ := json.Marshal(r.Content)
	if !r.IsError {
		return string(text), ""
	}
	sc, _ := r.StructuredContent.(map[string]any)
	e, _ := sc["error"].(map[string]any)
	code, _ := e["code"].(string)
	if code == "" {
		t.Fatalf("%s over ssh: an error without its code: %+v", tool, r)
	}
	return string(text), errcode.Code(code)
}

// A bare `mcp` (what `stemctl teacher config` writes without --instance)
// follows the student's selection, and the grant's instance list still
// holds: a selection outside it is refused, from the start of a session and
// when the student switches during one.
func TestSSHBareMCPSelectionOutsideGrant(t *testing.T) {
	s := newStudent(t)
	a := s.inst
	b := testenv.New(t, testenv.Options{Share: a, Profile: "hazard3-sim", Series: "demo", Card: "hello", Task: "2"})
	key, g := s.grant(t, "limited", "assist", "--instance", a.Name)
	mark(t, a, "I-AM-A")
	mark(t, b, "I-AM-B")
	// Both tmux servers number their panes alike, so the same pane id
	// reaches whichever instance is served.
	pane := s.shellPane(t)
	if got := strings.TrimSpace(b.Tmux(t, "list-panes", "-t", "stem:shell", "-F", "#{pane_id}")); got != pane {
		t.Fatalf("shell panes %s and %s differ: a capture of B would not be tried", pane, got)
	}
	capture := map[string]any{"pane": pane}

	t.Run("selected from the start", func(t *testing.T) {
		b.Select(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// initialize is answered (it touches no instance); every call that
		// would reach the instance is refused.
		c, _, err := s.mcpClient(t, ctx, key.Private, "mcp")
		if err != nil {
			t.Fatalf("initialize over ssh: %v\nsshd log:\n%s", err, s.srv.Log())
		}
		defer c.Close()
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{{"pane_capture", capture}, {"session_status", nil}, {"nvim_open", map[string]any{"path": "t2/main.c"}}} {
			text, code := callCode(t, ctx, c, tc.tool, tc.args)
			if code != errcode.NotGranted || !strings.Contains(text, b.Name+" "+notAllowed) || strings.Contains(text, "I-AM-B") {
				t.Errorf("%s with %s selected: code %q, %s", tc.tool, b.Name, code, text)
			}
		}
		// The session's start records the refusal: who, from where, and
		// that no instance was served.
		var start audit.Entry
		for _, e := range entries(t, s, audit.SessionStart) {
			if e.Grant == g.Label() {
				start = e
			}
		}
		if start.Result != "refused" || !strings.Contains(start.Detail, b.Name+" "+notAllowed) || !strings.Contains(start.Detail, "mcp "+a.Name) || start.Instance != "" || start.ContainerID != "" ||
			start.KeyFP != g.KeyFP || start.Level != "assist" || !strings.HasPrefix(start.Client, "127.0.0.1:") {
			t.Errorf("session_start entry: %+v", start)
		}
		// Every call is audited with its refusal, read-only ones too.
		for _, tool := range []string{"pane_capture", "session_status", "nvim_open"} {
			e := lastRefusal(t, s, g, tool)
			if e.Result != "refused" || !strings.Contains(e.Detail, b.Name+" "+notAllowed) || e.Instance != "" || e.ContainerID != "" {
				t.Errorf("%s entry: %+v", tool, e)
			}
		}

		// The same session serves A once the student selects it: the
		// refusal above was about the instance, not the key.
		a.Select(t)
		if text, isErr := callText(t, ctx, c, "pane_capture", capture); isErr || !strings.Contains(text, "I-AM-A") {
			t.Errorf("pane_capture after selecting %s: error %v, %s", a.Name, isErr, text)
		}
	})

	t.Run("switched during a session", func(t *testing.T) {
		a.Select(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, _, err := s.mcpClient(t, ctx, key.Private, "mcp")
		if err != nil {
			t.Fatalf("initialize over ssh: %v", err)
		}
		defer c.Close()
		if text, isErr := callText(t, ctx, c, "pane_capture", capture); isErr || !strings.Contains(text, "I-AM-A") || strings.Contains(text, "I-AM-B") {
			t.Fatalf("pane_capture with %s selected: error %v, %s", a.Name, isErr, text)
		}
		before := len(entries(t, s, audit.Refused))
		b.Select(t)
		// The very next call: no grace period in which B is served. The
		// refusal says which instances the grant allows and how to ask
		// for one.
		if text, code := callCode(t, ctx, c, "pane_capture", capture); code != errcode.NotGranted || !strings.Contains(text, b.Name+" "+notAllowed) ||
			!strings.Contains(text, "mcp "+a.Name) || strings.Contains(text, "I-AM-B") {
			t.Errorf("pane_capture after switching to %s: code %q, %s", b.Name, code, text)
		}
		// The read-only call's refusal is in the audit log.
		refusals := entries(t, s, audit.Refused)
		if len(refusals) != before+1 {
			t.Fatalf("pane_capture refused mid-session: %d new refused entries, want 1", len(refusals)-before)
		}
		if e := refusals[len(refusals)-1]; e.Tool != "pane_capture" || e.Result != "refused" || e.Grant != g.Label() || !strings.Contains(e.Detail, b.Name+" "+notAllowed) ||
			e.Instance != "" || e.KeyFP != g.KeyFP || !strings.HasPrefix(e.Client, "127.0.0.1:") {
			t.Errorf("pane_capture entry after the switch: %+v", e)
		}
		// A resource read likewise.
		read := mcp.ReadResourceRequest{}
		read.Params.URI = "stem://pane/" + strings.TrimPrefix(pane, "%")
		if r, err := c.ReadResource(ctx, read); err == nil || !strings.Contains(err.Error(), notAllowed) {
			t.Errorf("resource %s after switching to %s: %v, %v", read.Params.URI, b.Name, r, err)
		}
		if e := lastRefusal(t, s, g, "resources/read"); e.Result != "refused" || !strings.Contains(e.Detail, read.Params.URI+": instance "+b.Name+" "+notAllowed) {
			t.Errorf("resource read entry after the switch: %+v", e)
		}
		if text, isErr := callText(t, ctx, c, "nvim_open", map[string]any{"path": "t2/main.c"}); !isErr || !strings.Contains(text, notAllowed) {
			t.Errorf("nvim_open after switching to %s: error %v, %s", b.Name, isErr, text)
		}
		open := lastRefusal(t, s, g, "nvim_open")
		if open.Result != "refused" || !strings.Contains(open.Detail, b.Name+" "+notAllowed) || open.KeyFP != g.KeyFP || !strings.HasPrefix(open.Client, "127.0.0.1:") {
			t.Errorf("nvim_open entry after the switch: %+v", open)
		}
	})
}

// An assist-level session makes a change in the student's Neovim through
// ssh, and the audit log says who made it, from where, where and how.
func TestSSHAssistEffectfulCallIsAudited(t *testing.T) {
	s := newStudent(t)
	key, g := s.grant(t, "helper", "assist", "--instance", s.inst.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := s.mcpClient(t, ctx, key.Private, "mcp", s.inst.Name)
	if err != nil {
		t.Fatalf("initialize over ssh: %v\nsshd log:\n%s", err, s.srv.Log())
	}
	defer c.Close()
	if text, isErr := callText(t, ctx, c, "nvim_open", map[string]any{"path": "t1/words.c"}); isErr {
		t.Fatalf("nvim_open: %s", text)
	}
	const note = "stem-ssh-hint: check the loop bound"
	hintArgs := map[string]any{"path": "t1/words.c", "line": 3, "text": note}
	if text, isErr := callText(t, ctx, c, "nvim_hint", hintArgs); isErr {
		t.Fatalf("nvim_hint: %s", text)
	}

	// The hint is in the student's Neovim, read there directly.
	nv, err := nvim.Dial(ctx, s.inst.Dir.Nvim(), nvim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nv.Close()
	marks, err := nv.Lua(ctx, `local ns = vim.api.nvim_create_namespace('stem-hint')
local out = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, ns, 0, -1, {details = true})) do
    -- at the end of its line, or wrapped onto rows below it
    local s = ''
    for _, chunk in ipairs(m[4].virt_text or {}) do s = s .. chunk[1] end
    for _, row in ipairs(m[4].virt_lines or {}) do
      local r = ''
      for _, chunk in ipairs(row) do r = r .. chunk[1] end
      s = s == '' and r or (s .. ' ' .. r)
    end
    table.insert(out, vim.fn.fnamemodify(vim.api.nvim_buf_get_name(b), ':t') .. ':' .. (m[2] + 1) .. ':' .. s)
  end
end
return table.concat(out, '\n')`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if marks != "words.c:3:hint from teacher helper: "+note {
		t.Fatalf("stem hints in the student's Neovim: %q", marks)
	}

	// The client's address as sshd saw it (its log names the port and the
	// key): the gate takes it from SSH_CONNECTION.
	accepted := regexp.MustCompile(`Accepted publickey for \S+ from 127\.0\.0\.1 port (\d+) ssh2: ED25519 ` + regexp.QuoteMeta(g.KeyFP))
	m := accepted.FindAllStringSubmatch(s.srv.Log(), -1)
	if len(m) != 1 {
		t.Fatalf("sshd accepted the key %d times, want once:\n%s", len(m), s.srv.Log())
	}
	client := "127.0.0.1:" + m[0][1]

	e := lastCall(t, s, g, "nvim_hint")
	want := audit.Entry{
		Event: audit.ToolCall, Account: e.Account, Grant: g.Label(), KeyFP: g.KeyFP, Client: client, Session: e.Session,
		Instance: s.inst.Name, ContainerID: s.inst.Record.ContainerID, Level: "assist", Tool: "nvim_hint",
		ArgsDigest: audit.Digest(hintArgs), Result: "ok",
	}
	got := e
	got.Seq, got.Time, got.Prev, got.Hash, got.Intent, got.Duration = 0, time.Time{}, "", "", 0, ""
	if got != want || e.Account == "" || e.Session == "" || e.Time.IsZero() || len(s.inst.Record.ContainerID) != 64 {
		t.Errorf("nvim_hint audit entry\n got %+v\nwant %+v", got, want)
	}
	// Its intent came first, with the same identity, and names no outcome.
	var intent audit.Entry
	for _, in := range entries(t, s, audit.ToolIntent) {
		if in.Seq == e.Intent {
			intent = in
		}
	}
	wantIntent := want
	wantIntent.Event, wantIntent.Result = audit.ToolIntent, ""
	gotIntent := intent
	gotIntent.Seq, gotIntent.Time, gotIntent.Prev, gotIntent.Hash = 0, time.Time{}, "", ""
	if e.Intent == 0 || e.Duration == "" || gotIntent != wantIntent || intent.Seq >= e.Seq {
		t.Errorf("nvim_hint's intent (outcome names seq %d, duration %q)\n got %+v\nwant %+v", e.Intent, e.Duration, gotIntent, wantIntent)
	}
	if other := audit.Digest(map[string]any{"path": "t1/words.c", "line": 4, "text": note}); other == e.ArgsDigest {
		t.Error("the digest does not depend on the arguments: the comparison above proves nothing")
	}
	// The session's start has the same identity and session.
	found := false
	for _, st := range entries(t, s, audit.SessionStart) {
		found = found || (st.Session == e.Session && st.Grant == g.Label() && st.Client == client && st.Instance == s.inst.Name)
	}
	if !found {
		t.Errorf("no session_start for session %s from %s", e.Session, client)
	}
	if res, err := s.auditLog(t).Verify(); err != nil || !res.OK {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

// `access grant --from` writes from= and sshd enforces it: the key works
// from a matching address (ssh connects from 127.0.0.1 here) and is
// refused before the gate runs from anywhere else.
func TestSSHFromRestriction(t *testing.T) {
	s := newStudent(t)
	for i, tc := range []struct {
		from string
		ok   bool
	}{
		{"10.9.8.7", false},
		{"10.0.0.0/8,192.0.2.*", false},
		{"!127.0.0.1,*", false},
		{"127.0.0.1", true},
		{"10.9.8.7,127.0.0.0/8", true},
		{"127.0.0.?", true},
	} {
		name := fmt.Sprintf("from%d", i)
		key, g := s.grant(t, name, "observe", "--from", tc.from)
		if g.From != tc.from {
			t.Fatalf("grant --from %q stored %q", tc.from, g.From)
		}
		r := s.srv.Run(t, key.Private, nil, "status")
		if tc.ok {
			if st := status(t, r); st.Grant != name {
				t.Errorf("from=%q: status = %+v", tc.from, st)
			}
			continue
		}
		if r.Code != 255 || !strings.Contains(r.Stderr, "Permission denied") || r.Stdout != "" {
			t.Errorf("from=%q: not refused: %+v", tc.from, r)
		}
		// sshd turned the key down for its from=, not for anything else,
		// and the gate never ran (it would have audited the request).
		log := s.srv.Log()
		if !strings.Contains(log, "correct key but not from a permitted host (host=127.0.0.1, ip=127.0.0.1, required="+tc.from+")") ||
			!strings.Contains(log, "Failed publickey for "+s.srv.User+" from 127.0.0.1 port ") || !strings.Contains(log, g.KeyFP) {
			t.Errorf("from=%q: sshd log does not say the key was refused for its from=:\n%s", tc.from, log)
		}
		for _, ev := range []string{audit.Refused, audit.ToolCall, audit.SessionStart} {
			for _, e := range entries(t, s, ev) {
				if e.Grant == g.Label() {
					t.Errorf("from=%q: the gate ran: %+v", tc.from, e)
				}
			}
		}
	}
}

// entries reads the student's audit log for one event.
func entries(t *testing.T, s *student, event string) []audit.Entry {
	t.Helper()
	es, err := s.auditLog(t).Read(audit.Filter{Event: event})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// lastRefusal is the newest refused entry of grant g for tool.
func lastRefusal(t *testing.T, s *student, g access.Grant, tool string) audit.Entry {
	t.Helper()
	var last audit.Entry
	for _, e := range entries(t, s, audit.Refused) {
		if e.Grant == g.Label() && e.Tool == tool {
			last = e
		}
	}
	return last
}

// lastCall is the newest tool_call entry of grant g for tool.
func lastCall(t *testing.T, s *student, g access.Grant, tool string) audit.Entry {
	t.Helper()
	var last audit.Entry
	for _, e := range entries(t, s, audit.ToolCall) {
		if e.Grant == g.Label() && e.Tool == tool {
			last = e
		}
	}
	return last
}
