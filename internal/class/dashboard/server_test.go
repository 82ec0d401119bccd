package dashboard

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

const token = "0123456789abcdef0123456789abcdef"

// hostile is pane text a student (or a program in their container) can
// print: HTML, a script, an OSC 52 clipboard write, a title change, bidi
// overrides, raw controls, and colours that must survive.
const hostile = "\x1b]0;<script>alert(1)</script>\x07" +
	"<script>fetch('/canary')</script><img src=/canary onerror=alert(1)>\n" +
	"\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mred\x1b[0m & \x1b[1;38;5;208mamber\x1b[0m \u202eevil\u202c\n" +
	"\"quotes\" 'single' </pre></section>\x00\x08\x1b[38;2;255;0;0mtrue\x1b[m\xff"

func newTest(t *testing.T, students ...string) (*Board, *httptest.Server) {
	t.Helper()
	b := NewBoard(students)
	s := NewServer(b, token, "lab")
	s.MinGap = time.Millisecond
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return b, srv
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestTokenRequired(t *testing.T) {
	_, srv := newTest(t, "s1")
	for _, path := range []string{"/", "/?token=", "/?token=" + token[:31] + "0", "/?token=" + token + "0", "/?token=" + token[:16],
		"/app.js", "/app.css", "/palette.css", "/events", "/tiles", "/nosuch"} {
		resp, body := get(t, http.DefaultClient, srv.URL+path)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, resp.StatusCode)
		}
		if resp.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: 401 without the CSP", path)
		}
		if strings.Contains(body, "s1") || strings.Contains(body, token) {
			t.Errorf("%s: the 401 tells: %q", path, body)
		}
	}
	// The right token opens the page and leaves a cookie that opens the
	// page's own requests (an EventSource cannot send a header).
	resp, body := get(t, http.DefaultClient, srv.URL+"/?token="+token)
	if resp.StatusCode != 200 || !strings.Contains(body, `<script src="/app.js"`) {
		t.Fatalf("with the token: %d %q", resp.StatusCode, body)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != token {
		t.Fatalf("cookie: %+v", cookie)
	}
	for _, path := range []string{"/app.js", "/app.css", "/palette.css", "/tiles"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.AddCookie(cookie)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 || r.Header.Get("Content-Security-Policy") != CSP || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s with the cookie: %d %v", path, r.StatusCode, r.Header)
		}
	}
}

// The page is whole without the network, and its own files would pass the
// CSP: no other origin, no inline script, style or event handler.
func TestPageOfflineAndCSPClean(t *testing.T) {
	for _, name := range []string{"assets/index.html", "assets/app.js", "assets/app.css"} {
		data, err := assets.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		if regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).MatchString(s) {
			t.Errorf("%s names another origin", name)
		}
		if strings.HasSuffix(name, ".html") {
			if regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|\sstyle=|\son[a-z]+=|<style`).MatchString(s) {
				t.Errorf("%s has inline script, style or an event handler", name)
			}
		}
		if strings.HasSuffix(name, ".js") && regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).MatchString(s) {
			t.Errorf("%s builds HTML from strings", name)
		}
	}
	if !strings.Contains(CSP, "script-src 'self'") || strings.Contains(CSP, "unsafe") || !strings.Contains(CSP, "default-src 'none'") {
		t.Errorf("CSP: %s", CSP)
	}
}

func TestScreenKeepsColoursDropsTheRest(t *testing.T) {
	lines := Screen(hostile, 10, 200)
	plain := PlainText(lines)
	for _, bad := range []string{"\x1b", "\x07", "\x00", "\x08", "ZXZpbA", "alert(1)</script>\x07", "\u202e", "\u202c"} {
		if strings.Contains(plain, bad) {
			t.Errorf("the screen keeps %q: %q", bad, plain)
		}
	}
	// The HTML stays, as text: the page shows it, it never runs.
	for _, want := range []string{"<script>fetch('/canary')</script><img src=/canary onerror=alert(1)>", "red & amber evil", "</pre></section>", "true\uFFFD"} {
		if !strings.Contains(plain, want) {
			t.Errorf("the screen lost %q: %q", want, plain)
		}
	}
	classes := map[string]string{}
	for _, l := range lines {
		for _, r := range l {
			classes[r.Text] = r.Class
			if !regexp.MustCompile(`^[a-z0-9 ]*$`).MatchString(r.Class) {
				t.Errorf("class %q", r.Class)
			}
		}
	}
	if classes["red"] != "f1" || classes["amber"] != "f208 bold" || classes["true"] != "f196" || classes[" & "] != "" {
		t.Errorf("colours: %q", classes)
	}
	if got := Screen(strings.Repeat("x", 500)+"\n"+strings.Repeat("l\n", 100), 50, 80); len(got) != 50 || len([]rune(got[0][0].Text)) != 1 {
		t.Errorf("bounds: %d lines", len(got))
	}
	if got := Screen(strings.Repeat("y", 500), 5, 80); len([]rune(got[0][0].Text)) != 80 {
		t.Errorf("a long line keeps %d columns", len([]rune(got[0][0].Text)))
	}
}

// The wire carries student text as JSON strings: no byte of it can close
// the stream's framing or become markup.
func TestTilesJSONEscapesHostileText(t *testing.T) {
	b, srv := newTest(t, "s1")
	b.Update("s1", func(tl *Tile) {
		tl.Screen, tl.Event, tl.Task = Screen(hostile, 10, 200), oneLine("x\n\ndata: {}\n\n<b>"), oneLine("<i>t</i>")
	})
	resp, body := get(t, http.DefaultClient, srv.URL+"/tiles?token="+token)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, bad := range []string{"<", ">", "\x1b", "\n\n"} {
		if strings.Contains(strings.TrimSpace(body), bad) {
			t.Errorf("the JSON carries %q raw: %s", bad, body)
		}
	}
	var got struct{ Tiles []Tile }
	if err := json.Unmarshal([]byte(body), &got); err != nil || !strings.Contains(PlainText(got.Tiles[0].Screen), "<script>") {
		t.Fatalf("%v %s", err, body)
	}
}

// sse reads a stream's "tiles" events.
type sse struct {
	r    *bufio.Reader
	body io.Closer
}

func openSSE(t testing.TB, url string) *sse {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{r: bufio.NewReader(resp.Body), body: resp.Body}
}

func (s *sse) next(t testing.TB) (string, []Tile) {
	t.Helper()
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && name != "":
			var tiles []Tile
			if name == "tiles" {
				if err := json.Unmarshal([]byte(data), &tiles); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
			}
			return name, tiles
		}
	}
}

func names(tiles []Tile) string {
	var n []string
	for _, t := range tiles {
		n = append(n, t.Student)
	}
	return strings.Join(n, ",")
}

// The stream sends every tile once, then only the tiles that changed; a
// look that finds a screen as it was sends nothing.
func TestSSESendsOnlyChanges(t *testing.T) {
	b, srv := newTest(t, "s1", "s2", "s3")
	screen := func(s string) func(*Tile) { return func(t *Tile) { t.Screen = Screen(s, 10, 80) } }
	b.Update("s2", func(t *Tile) { t.Need, t.Flags = 90, []string{"instance-down"} })
	st := openSSE(t, srv.URL+"/events?token="+token)
	if name, _ := st.next(t); name != "hello" {
		t.Fatalf("first event %s", name)
	}
	if _, tiles := st.next(t); names(tiles) != "s2,s1,s3" {
		t.Fatalf("first send: %s (want every tile, who needs help first)", names(tiles))
	}
	b.Update("s1", screen("$ make\n\x1b[31merror\x1b[0m"))
	if _, tiles := st.next(t); names(tiles) != "s1" || PlainText(tiles[0].Screen) != "$ make\nerror" {
		t.Fatalf("after s1 changed: %s %+v", names(tiles), tiles)
	}
	// The same screen again, and a no-op update: nothing goes out; the
	// next send is s3's change alone.
	b.Update("s1", screen("$ make\n\x1b[31merror\x1b[0m"))
	b.Update("s2", func(t *Tile) {})
	b.Update("nobody", screen("x"))
	b.Update("s3", screen("$ ./hello"))
	if _, tiles := st.next(t); names(tiles) != "s3" {
		t.Fatalf("after s3 changed: %s", names(tiles))
	}
	// A second page gets every tile in its first send.
	st2 := openSSE(t, srv.URL+"/events?token="+token)
	st2.next(t)
	if _, tiles := st2.next(t); names(tiles) != "s2,s1,s3" {
		t.Fatalf("second page: %s", names(tiles))
	}
}

func TestIsPaletteComplete(t *testing.T) {
	_, srv := newTest(t)
	_, body := get(t, http.DefaultClient, srv.URL+"/palette.css?token="+token)
	if strings.Count(body, "{color:#") != 256 || !strings.Contains(body, ".f208{color:#ff8700}") || !strings.Contains(body, ".b255{background-color:#eeeeee}") {
		t.Errorf("palette:\n%.300s", body)
	}
}
