package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/stem-edu/stem/internal/class/dashboard/browsertest"
)

// attackPage is another origin's page (same site: 127.0.0.1, another
// port, so the SameSite=Strict cookie goes with its requests) that tries
// to make the teacher's browser send a hint: a form, a fetch without the
// header, a fetch with it (which needs a preflight).
const attackPage = `<!doctype html><html><body>
<form id="f" method="POST" enctype="text/plain" target="sink" action="%[1]s/student/s2/hint">
<input name='{"path":"/card/t1/words.c","line":3,"text":"pwned","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
document.getElementById("f").submit();
fetch("%[1]s/student/s2/hint", {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"},
  body: '{"path":"/card/t1/words.c","line":3,"text":"pwned"}'}).catch(function () {});
fetch("%[1]s/student/s2/hint", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json", "X-Stem-Action": "1"},
  body: '{"path":"/card/t1/words.c","line":3,"text":"pwned"}'}).catch(function () {}).finally(function () { document.title = "done"; });
</script></body></html>`

// A real chromium opens a student's page from the grid with the keyboard
// and with a click, shows the panes, the buffer and its diagnostic, the
// debugger and the timeline as text (a canary in them is never fetched),
// offers actions only at assist, sends a hint only after a confirmation
// that shows it, and another origin's page cannot make it act.
func TestBrowserStudentPage(t *testing.T) {
	bin := browsertest.Chromium(t)
	f := studentFake()
	f.levels["s1"], f.levels["s2"] = "observe", "assist"
	b := NewBoard([]string{"s1", "s2", "s3"})
	row, _ := f.StatusOf(t.Context(), "s1")
	b.Update("s1", func(t *Tile) { t.Screen, t.State, t.Agents = Screen("$ ls", 5, 80), "answers", agentLines(row) })
	srv := NewServer(b, token, "lab")
	srv.Students = f
	var canary, withCookie atomic.Int32
	posted := make(chan struct{}, 64) // a POST with the cookie was answered
	mux := http.NewServeMux()
	mux.HandleFunc("/canary", func(w http.ResponseWriter, r *http.Request) { canary.Add(1) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			if c, err := r.Cookie(cookieName); err == nil && c.Value == token {
				withCookie.Add(1)
				defer func() { posted <- struct{}{} }()
			}
		}
		srv.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	br := browsertest.New(t, bin, 1400, 1000)
	br.Open(hs.URL + "/?token=" + token)
	br.Wait(`document.querySelectorAll("section.tile").length == 3`, 30*time.Second)

	// Keyboard: the first tile (s1), j/l to the next (s2), back, Enter.
	key := func(k string) {
		t.Helper()
		if err := br.Do(10*time.Second, chromedp.KeyEvent(k)); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
	}
	browsertest.Eval[bool](br, `document.querySelector('section.tile[data-student="s1"]').focus(), true`)
	key("l")
	br.Wait(`document.activeElement.dataset.student === "s2"`, 10*time.Second)
	key("h")
	br.Wait(`document.activeElement.dataset.student === "s1"`, 10*time.Second)
	key(kb.Enter)
	br.Wait(`!document.getElementById("student").hidden && document.getElementById("spanes").textContent.includes("PANE-TEXT-42")`, 30*time.Second)
	dom := br.HTML()
	for _, want := range []string{`&lt;script&gt;fetch('/canary')&lt;/script&gt;`, `&lt;b&gt;sh&lt;/b&gt;`, `&lt;img src=/canary&gt;`,
		`undeclared identifier 'i' &lt;img src=/canary&gt;`, `no debugger running`, `build_failed`, `SIGSEGV &lt;b&gt;`, `claude/assist`,
		`no gate tool returns the audit log`, `<span class="f1">red</span>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("s1's page lacks %s", want)
		}
	}
	// observe: no action on the page.
	if !browsertest.Eval[bool](br, `document.getElementById("sactions").hidden && !document.getElementById("readonly").hidden && document.getElementById("readonly").textContent.includes("observe")`) {
		t.Errorf("s1 (observe) is offered actions:\n%s", br.HTML())
	}
	key(kb.Escape)
	br.Wait(`document.getElementById("student").hidden && !document.getElementById("grid").hidden && document.activeElement.dataset.student === "s1"`, 10*time.Second)

	// A click opens s2's page (assist): the actions are there.
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`section.tile[data-student="s2"]`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`!document.getElementById("student").hidden && !document.getElementById("sactions").hidden && !document.getElementById("hintform").hidden &&
		document.getElementById("hintpath").textContent === "/card/t1/words.c" && document.getElementById("keyspane").options.length === 1`, 30*time.Second)
	openMs := browsertest.Eval[string](br, `document.getElementById("student").dataset.openMs`)
	// A click on line 3 of the buffer puts the hint there.
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`#snvim .ln[data-n="3"]`)),
		chromedp.SendKeys(chromedp.CSS(`#hinttext`), "check the loop bound"),
		chromedp.Click(chromedp.CSS(`#hintform button`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`!document.getElementById("confirm").hidden`, 10*time.Second)
	confirm := browsertest.Eval[string](br, `document.getElementById("confirmtext").textContent`)
	if want := "nvim_hint to student s2\n  file: /card/t1/words.c\n  line: 3\n  text: check the loop bound"; confirm != want {
		t.Fatalf("the confirmation shows %q, want %q", confirm, want)
	}
	if n := len(f.called("nvim_hint")); n != 0 {
		t.Fatalf("the hint went before it was confirmed (%d)", n)
	}
	// Esc cancels; a second try is confirmed and sent.
	key(kb.Escape)
	br.Wait(`document.getElementById("confirm").hidden && !document.getElementById("student").hidden`, 10*time.Second)
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`#hintform button`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`!document.getElementById("confirm").hidden`, 10*time.Second)
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`#confirmyes`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`document.getElementById("actionresult").textContent.startsWith("nvim_hint sent")`, 30*time.Second)
	calls := f.called("nvim_hint")
	if len(calls) != 1 || calls[0].Student != "s2" || calls[0].Args["line"] != 3 || calls[0].Args["text"] != "check the loop bound" {
		t.Fatalf("hint calls: %+v", calls)
	}
	// Keys to the allowed pane, confirmed.
	if err := br.Do(10*time.Second, chromedp.SendKeys(chromedp.CSS(`#keystext`), "make{Enter}"), chromedp.Click(chromedp.CSS(`#keysform button`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`document.getElementById("confirmtext").textContent === "pane_send_keys to student s2\n  pane: %3\n  keys: make{Enter}"`, 10*time.Second)
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`#confirmyes`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`document.getElementById("actionresult").textContent.startsWith("pane_send_keys sent")`, 30*time.Second)
	if calls := f.called("pane_send_keys"); len(calls) != 1 || calls[0].Args["keys"] != "make{Enter}" {
		t.Fatalf("keys calls: %+v", calls)
	}
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "dashboard-student-standin.png"))
	}
	if n := canary.Load(); n != 0 {
		t.Fatalf("the canary was fetched %d times: student text ran as HTML", n)
	}

	// Another origin's page, in the same browser that holds the cookie.
	// The page's own POSTs above left marks in posted; drop them so the
	// wait below counts only the attack's requests.
	for drained := false; !drained; {
		select {
		case <-posted:
		default:
			drained = true
		}
	}
	before := withCookie.Load()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, attackPage, hs.URL)
	}))
	defer evil.Close()
	br.Open(evil.URL + "/")
	br.Wait(`document.title === "done"`, 30*time.Second)
	// The form's POST may land last: wait for the two requests a
	// browser lets through to reach the server with the cookie (the
	// attack was real), then check nothing was sent.
	for range 2 {
		select {
		case <-posted:
		case <-time.After(30 * time.Second):
		}
	}
	if got := withCookie.Load() - before; got < 2 {
		t.Fatalf("control: only %d of the other page's requests reached the dashboard with the cookie, so the test proves nothing", got)
	}
	if calls := f.called("nvim_hint"); len(calls) != 1 {
		t.Fatalf("another origin's page sent a hint: %+v", calls)
	}
	t.Logf("student page opened in %s ms (fetch to render, stand-in gate)", openMs)
}
