package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
	"github.com/stem-edu/stem/internal/tmux"
)

// paneAllow is pane p's stem_allow in a pane_list result.
func paneAllow(t *testing.T, r mcptest.Result, p string) string {
	t.Helper()
	panes, _ := r.Fields["panes"].([]any)
	for _, it := range panes {
		m, _ := it.(map[string]any)
		if m["id"] == p {
			s, _ := m["stem_allow"].(string)
			return s
		}
	}
	t.Fatalf("pane %s not in pane_list: %v", p, r.Fields)
	return ""
}

// At assist, keys go only to a pane the student opened on the host: the
// container's own @stem_allow (which anything in it can set) neither opens
// a pane nor shows as open. Control: the host's consent opens it, and at
// full any pane takes keys.
func TestInProcessSendKeysNeedsHostConsent(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	h.Tmux.SetOption("%1", "@stem_allow", "1") // planted in the container

	if got := paneAllow(t, h.Call("pane_list", nil), "%1"); got != "" {
		t.Errorf("pane_list shows the container's @stem_allow: %q", got)
	}
	r := h.Call("pane_send_keys", map[string]any{"pane": "%1", "keys": "make{Enter}"})
	if !r.IsError || r.Code != errcode.PaneNotAllowed {
		t.Fatalf("keys to a pane not allowed on the host: %+v", r)
	}
	if !strings.Contains(r.Text, "stemctl allow") {
		t.Errorf("the refusal does not say how to allow: %s", r.Text)
	}
	if n := len(h.Tmux.Sent()); n != 0 {
		t.Fatalf("refused keys reached tmux: %v", h.Tmux.Sent())
	}
	refused := false
	for _, e := range h.Audit() {
		if e.Event == audit.Refused && e.Tool == "pane_send_keys" {
			refused = true
		}
	}
	if !refused {
		t.Errorf("the refusal is not audited: %+v", h.Audit())
	}

	h.Instance.AllowPane(t, "%1")
	if got := paneAllow(t, h.Call("pane_list", nil), "%1"); got != "1" {
		t.Errorf("pane_list after the host's consent: stem_allow %q", got)
	}
	if got := paneAllow(t, h.Call("pane_list", nil), "%0"); got != "" {
		t.Errorf("consent for %%1 opened %%0 too: %q", got)
	}
	r = h.Call("pane_send_keys", map[string]any{"pane": "%1", "keys": "make{Enter}"})
	if r.IsError {
		t.Fatalf("control: keys to an allowed pane: %s", r.Text)
	}
	sent := h.Tmux.Sent()
	want := []tmux.Key{{Text: "make"}, {Name: "Enter"}}
	if len(sent) != 1 || sent[0].Pane != "%1" || len(sent[0].Keys) != 2 || sent[0].Keys[0] != want[0] || sent[0].Keys[1] != want[1] {
		t.Fatalf("tmux got %+v, want make and Enter in %%1", sent)
	}
	if r := h.Call("pane_send_keys", map[string]any{"pane": "%0", "keys": "x"}); r.Code != errcode.PaneNotAllowed {
		t.Errorf("keys to %%0 (not allowed) after %%1 was: %+v", r)
	}

	full := mcptest.New(t, mcptest.Options{Level: mcpserver.Full})
	if r := full.Call("pane_send_keys", map[string]any{"pane": "%0", "keys": "x"}); r.IsError {
		t.Errorf("control: full sends keys to any pane: %s", r.Text)
	}
}

// Pane ids and key specs are checked before anything reaches tmux.
func TestInProcessPaneArguments(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Full})
	for _, c := range []struct {
		tool string
		args map[string]any
		code errcode.Code
	}{
		{"pane_capture", map[string]any{"pane": "stem:shell"}, errcode.BadInput},
		{"pane_send_keys", map[string]any{"pane": "%1;kill-server", "keys": "x"}, errcode.BadInput},
		{"pane_send_keys", map[string]any{"pane": "%1", "keys": "{NoSuchKey}"}, errcode.BadInput},
		{"pane_wait", map[string]any{"pane": "%1"}, errcode.BadInput},
		{"pane_wait", map[string]any{"pane": "%1", "pattern": "("}, errcode.BadInput},
	} {
		r := h.Call(c.tool, c.args)
		if !r.IsError || r.Code != c.code {
			t.Errorf("%s %v: %+v, want code %s", c.tool, c.args, r, c.code)
		}
	}
	if n := len(h.Tmux.Sent()); n != 0 {
		t.Errorf("refused calls reached tmux: %v", h.Tmux.Sent())
	}
}

// pane_capture returns a pane's text apart from its fields, and a cursor
// that a later capture resumes from; pane_wait finds a pattern.
func TestInProcessCaptureAndWait(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
	h.Tmux.SetText("%1", "student$ make", "cc -o hello hello.c", "student$ ")
	r := h.Call("pane_capture", map[string]any{"pane": "%1"})
	if r.IsError || !strings.Contains(r.Text, "cc -o hello hello.c") {
		t.Fatalf("capture: %+v", r)
	}
	cur, _ := r.Fields["cursor"].(string)
	if !strings.HasPrefix(cur, "c3:"+h.Instance.Record.ContainerID[:12]+":") {
		t.Fatalf("cursor %q is not bound to the container", cur)
	}
	h.Tmux.SetText("%1", "student$ make", "cc -o hello hello.c", "student$ ./hello", "hello, world", "student$ ")
	r = h.Call("pane_capture", map[string]any{"pane": "%1", "since": cur})
	if r.IsError || strings.Contains(r.Text, "cc -o") || !strings.Contains(r.Text, "hello, world") {
		t.Fatalf("capture since the cursor: %+v", r)
	}
	other := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
	if r := other.Call("pane_capture", map[string]any{"pane": "%1", "since": cur}); r.Code != errcode.Stale {
		t.Errorf("another container's cursor: %+v", r)
	}
	if r := h.Call("pane_capture", map[string]any{"pane": "%9"}); !r.IsError {
		t.Errorf("capture of a pane that does not exist: %+v", r)
	}
	r = h.Call("pane_wait", map[string]any{"pane": "%1", "pattern": "^hello, (\\w+)$", "timeout_ms": 1000})
	if r.IsError || r.Fields["matched"] != true || r.Fields["match"] != "hello, world" {
		t.Fatalf("pane_wait: %+v", r)
	}
	r = h.Call("pane_wait", map[string]any{"pane": "%1", "pattern": "never printed", "timeout_ms": 1})
	if r.IsError || r.Fields["timed_out"] != true {
		t.Fatalf("pane_wait timing out is an answer: %+v", r)
	}
}
