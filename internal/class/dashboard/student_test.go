package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newStudentTest(t *testing.T, f *fakeSource) *httptest.Server {
	t.Helper()
	b := NewBoard([]string{"s1", "s2", "s3"})
	row, _ := f.StatusOf(t.Context(), "s1")
	b.Update("s1", func(t *Tile) { t.Agents = agentLines(row) }) // as Live puts them
	s := NewServer(b, token, "lab")
	s.Students = f
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func studentView(t *testing.T, srv *httptest.Server, name string) StudentView {
	t.Helper()
	resp, body := get(t, http.DefaultClient, srv.URL+"/student/"+name+"?token="+token)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("student %s: %d %s", name, resp.StatusCode, body)
	}
	var v StudentView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The page has every pane, the buffer with its diagnostic on its line,
// the debugger, the student's own events, the agents, and why no audit;
// student text is cleaned of escapes and controls but kept as text.
func TestStudentPageShowsTheSession(t *testing.T) {
	f := studentFake()
	f.levels["s1"] = "observe"
	srv := newStudentTest(t, f)
	f.status = 0
	v := studentView(t, srv, "s1")
	if f.status != 0 {
		t.Errorf("reading the page asked for the status %d times (each an audit line on the student's side)", f.status)
	}
	if !v.Connected || v.Level != "observe" || v.Actions.Hint || v.Actions.Keys {
		t.Fatalf("connected %v level %q actions %+v", v.Connected, v.Level, v.Actions)
	}
	if len(v.Panes) != 2 || v.Panes[0].ID != "%3" || !v.Panes[0].Active || !v.Panes[0].Allowed || v.Panes[1].Allowed {
		t.Fatalf("panes (the active window's first, keys allowed in %%3 only): %+v", v.Panes)
	}
	screen := PlainText(v.Panes[1].Screen)
	if !strings.Contains(screen, "PANE-TEXT-42") || !strings.Contains(screen, "<script>fetch('/canary')</script>") || strings.ContainsAny(screen, "\x1b\x07\x00") {
		t.Errorf("pane text: %q", screen)
	}
	if !strings.Contains(v.Panes[0].Label, "<b>sh</b>") || !strings.Contains(v.Panes[0].Label, "<img src=/canary>") {
		t.Errorf("label: %q", v.Panes[0].Label)
	}
	n := v.Nvim
	if n.File != "/card/t1/words.c" || n.Cursor != 3 || len(n.Lines) != 4 || n.Lines[2].N != 3 || n.Lines[2].Diag != "error" || n.Lines[1].Diag != "" ||
		!strings.Contains(n.Lines[2].Text, "i <= n") || strings.Contains(n.Lines[2].Text, "\t") {
		t.Errorf("buffer: %+v", n)
	}
	if len(n.Diagnostics) != 1 || n.Diagnostics[0].Severity != "error" || !strings.Contains(n.Diagnostics[0].Message, "undeclared") {
		t.Errorf("diagnostics: %+v", n.Diagnostics)
	}
	if v.GDB.State != "no-debugger" || !strings.Contains(v.GDB.Text, "gdb is not running") || strings.Contains(v.GDB.Text, "notice") {
		t.Errorf("gdb: %+v", v.GDB)
	}
	if len(v.Events) != 2 || !strings.Contains(v.Events[0], "build_failed") || !strings.Contains(v.Events[1], "SIGSEGV <b>") {
		t.Errorf("timeline (s1's events only, oldest first): %q", v.Events)
	}
	if len(v.Agents) != 1 || !strings.Contains(v.Agents[0], "claude/assist") || !strings.Contains(v.Audit, "no gate tool returns the audit log") {
		t.Errorf("agents %q, audit %q", v.Agents, v.Audit)
	}
	// Reading the page asks only read tools.
	for _, c := range f.calls {
		if c.Tool == "nvim_hint" || c.Tool == "pane_send_keys" {
			t.Errorf("reading the page called %s", c.Tool)
		}
	}
}

// A student without an open session: the page says why; no call is made.
func TestStudentPageNotConnected(t *testing.T) {
	f := studentFake()
	srv := newStudentTest(t, f)
	v := studentView(t, srv, "s3")
	if v.Connected || !strings.Contains(v.Error, "key-refused") || len(v.Panes) != 0 || len(f.calls) != 0 {
		t.Fatalf("%+v, calls %v", v, f.calls)
	}
	if resp, _ := get(t, http.DefaultClient, srv.URL+"/student/nobody?token="+token); resp.StatusCode != 404 {
		t.Errorf("an unknown student: %d", resp.StatusCode)
	}
	if resp, _ := get(t, http.DefaultClient, srv.URL+"/student/s1"); resp.StatusCode != 401 {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
}

// post sends an action as the page does, with changes made by edit.
func post(t *testing.T, srv *httptest.Server, path, body string, edit func(*http.Request)) (int, ActionResult) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	req.AddCookie(&http.Cookie{Name: cookieName, Value: token})
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ActionHeader, "1")
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var res ActionResult
	json.Unmarshal(data, &res)
	return resp.StatusCode, res
}

const hintBody = `{"path":"/card/t1/words.c","line":3,"text":"check the loop bound"}`

// At assist the page's own request sends the hint through the session,
// exactly as confirmed; at observe the same request is refused before any
// call, and the page offers no action.
func TestHintAtAssistRefusedAtObserve(t *testing.T) {
	f := studentFake()
	f.levels["s1"], f.levels["s2"] = "observe", "assist"
	srv := newStudentTest(t, f)
	if v := studentView(t, srv, "s2"); !v.Actions.Hint || !v.Actions.Keys {
		t.Fatalf("assist: actions %+v", v.Actions)
	}
	code, res := post(t, srv, "/student/s1/hint", hintBody, nil)
	if code != 403 || !strings.Contains(res.Error, "level observe") || len(f.called("nvim_hint")) != 0 {
		t.Fatalf("hint at observe: %d %+v, calls %v", code, res, f.called("nvim_hint"))
	}
	code, res = post(t, srv, "/student/s1/keys", `{"pane":"%3","keys":"ls{Enter}"}`, nil)
	if code != 403 || len(f.called("pane_send_keys")) != 0 {
		t.Fatalf("keys at observe: %d %+v", code, res)
	}
	// The control: the same request for the assist-level student.
	code, res = post(t, srv, "/student/s2/hint", hintBody, nil)
	calls := f.called("nvim_hint")
	if code != 200 || !res.OK || len(calls) != 1 || calls[0].Student != "s2" || calls[0].Args["path"] != "/card/t1/words.c" ||
		calls[0].Args["line"] != 3 || calls[0].Args["text"] != "check the loop bound" {
		t.Fatalf("hint at assist: %d %+v, calls %+v", code, res, calls)
	}
	for _, bad := range []string{`{"path":"x","line":0,"text":"t"}`, `{"path":"x","line":1,"text":"a\nb"}`, `{"path":"x","line":1,"text":""}`,
		`{"path":"x","line":1,"text":"t","clear":true}`, `{"path":"x","line":1,"text":"` + strings.Repeat("y", 501) + `"}`, `not json`} {
		if code, res := post(t, srv, "/student/s2/hint", bad, nil); code != 400 {
			t.Errorf("hint %s: %d %+v", bad, code, res)
		}
	}
	if n := len(f.called("nvim_hint")); n != 1 {
		t.Errorf("bad hints reached the session: %d calls", n)
	}
}

// Keys go only to a pane the student allows, even when the grant (full)
// would take any pane.
func TestKeysOnlyToAllowedPanes(t *testing.T) {
	f := studentFake()
	f.levels["s1"] = "full"
	srv := newStudentTest(t, f)
	if code, res := post(t, srv, "/student/s1/keys", `{"pane":"%0","keys":"ls{Enter}"}`, nil); code != 403 || !strings.Contains(res.Error, "stemctl allow") {
		t.Fatalf("keys to a pane not allowed: %d %+v", code, res)
	}
	if n := len(f.called("pane_send_keys")); n != 0 {
		t.Fatalf("%d keys sent", n)
	}
	code, res := post(t, srv, "/student/s1/keys", `{"pane":"%3","keys":"make{Enter}"}`, nil)
	calls := f.called("pane_send_keys")
	if code != 200 || len(calls) != 1 || calls[0].Args["pane"] != "%3" || calls[0].Args["keys"] != "make{Enter}" {
		t.Fatalf("keys to %%3: %d %+v %+v", code, res, calls)
	}
}

// What another page could make the teacher's browser send is refused,
// cookie and token or not: no custom header, another origin or site, a
// form's content type. The control (the page's own request) is above.
func TestActionsRefuseCrossOrigin(t *testing.T) {
	f := studentFake()
	f.levels["s1"] = "assist"
	srv := newStudentTest(t, f)
	for name, edit := range map[string]func(*http.Request){
		"no header":      func(r *http.Request) { r.Header.Del(ActionHeader) },
		"another origin": func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:1") },
		"a null origin":  func(r *http.Request) { r.Header.Set("Origin", "null") },
		"cross-site":     func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
		"same-site":      func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") },
		"a form":         func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") },
		"text/plain":     func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") },
		"the token, no header": func(r *http.Request) {
			r.Header.Del(ActionHeader)
			r.Header.Del("Cookie")
			q := r.URL.Query()
			q.Set("token", token)
			r.URL.RawQuery = q.Encode()
		},
	} {
		if code, res := post(t, srv, "/student/s1/hint", hintBody, edit); code != 403 {
			t.Errorf("%s: %d %+v", name, code, res)
		}
	}
	if code, _ := post(t, srv, "/student/s1/hint", hintBody, func(r *http.Request) { r.Header.Del("Cookie") }); code != 401 {
		t.Errorf("without cookie or token: %d", code)
	}
	if n := len(f.called("nvim_hint")); n != 0 {
		t.Fatalf("a refused request reached the session %d times", n)
	}
	// A GET cannot act.
	if resp, _ := get(t, http.DefaultClient, srv.URL+"/student/s1/hint?token="+token); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET hint: %d", resp.StatusCode)
	}
}

// The time to gather a student's page on the server, with the gate's
// answers at hand (the real round trips are in the serve test).
func BenchmarkStudentPage(b *testing.B) {
	f := studentFake()
	f.levels["s1"] = "assist"
	board := NewBoard([]string{"s1"})
	for b.Loop() {
		LookStudent(b.Context(), f, board, "s1")
	}
}
