package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class/dashboard/browsertest"
)

// controlJS puts the same pane text into a page as HTML: what a dashboard
// that used innerHTML would do. It shows the payload works in this
// browser, under the same CSP.
const controlJS = `fetch("/tiles").then(r => r.json()).then(d => {
  d.tiles.forEach(t => { const p = document.createElement("pre"); p.innerHTML = t.screen.map(l => l.map(r => r.t).join("")).join("\n"); document.body.appendChild(p); });
});`

// flushHook calls after on the stream's second flush (hello, then the
// first tiles): a change made then can only reach the page as an update.
type flushHook struct {
	http.ResponseWriter
	n     int
	after func()
}

func (f *flushHook) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	if f.n++; f.n == 2 && f.after != nil {
		f.after()
	}
}

// A real headless chromium shows every tile, the students who need help
// first, colours as classes, hostile pane text as text (a canary that an
// <img> in it would fetch is never fetched, while the same text put in as
// HTML fetches it), and a change sent after the first send.
func TestBrowserRendersTilesAsText(t *testing.T) {
	bin := browsertest.Chromium(t)
	b := NewBoard([]string{"s1", "s2", "s3"})
	b.Update("s1", func(t *Tile) {
		t.Screen, t.Card, t.Task, t.State, t.Event = Screen(hostile, 20, 200), "demo/hello", "1", "answers", "17:00:00 pane_exit %1 exit 139"
	})
	b.Update("s2", func(t *Tile) {
		t.Screen, t.State, t.Need, t.Flags = Screen("$ ./hello\nSegmentation fault (core dumped)", 20, 200), "down", 90, []string{"instance-down"}
	})
	b.Update("s3", func(t *Tile) { t.Screen, t.State = Screen("$ ls\nhello.c", 20, 200), "answers" })
	var canary atomic.Int32
	var once sync.Once
	srv := NewServer(b, token, "lab")
	mux := http.NewServeMux()
	mux.HandleFunc("/canary", func(w http.ResponseWriter, r *http.Request) { canary.Add(1) })
	mux.HandleFunc("/control", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", CSP)
		w.Write([]byte(`<!doctype html><html><body><script src="/control.js"></script></body></html>`))
	})
	mux.HandleFunc("/control.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(controlJS))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			w = &flushHook{ResponseWriter: w, after: func() {
				once.Do(func() {
					b.Update("s3", func(t *Tile) { t.Screen = Screen("$ ./hello\nhello, \x1b[32mworld\x1b[0m", 20, 200) })
				})
			}}
		}
		srv.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	br := browsertest.New(t, bin, 1400, 800)
	br.Open(hs.URL + "/?token=" + token)
	br.Wait(`document.querySelectorAll("section.tile").length == 3 && Number(document.body.dataset.updates) >= 2 && document.body.textContent.includes("world")`, 30*time.Second)
	dom := br.HTML()
	tiles := regexp.MustCompile(`<section class="tile[^"]*"[^>]*data-student="([^"]+)"`).FindAllStringSubmatch(dom, -1)
	var order []string
	for _, m := range tiles {
		order = append(order, m[1])
	}
	if strings.Join(order, ",") != "s2,s1,s3" {
		t.Fatalf("tiles %v, want s2 (needs help) first:\n%s", order, dom)
	}
	for _, want := range []string{
		`&lt;script&gt;fetch('/canary')&lt;/script&gt;&lt;img src=/canary onerror=alert(1)&gt;`,
		`<span class="f1">red</span>`, `<span class="f208 bold">amber</span>`, `&lt;/pre&gt;&lt;/section&gt;`,
		`Segmentation fault (core dumped)`, `<span class="flag instance-down">instance-down</span>`,
		`hello, <span class="f2">world</span>`, `class lab`, `17:00:00 pane_exit %1 exit 139`,
		`<span class="task">demo/hello task 1</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`<section class="tile need-hi"[^>]*data-student="s2"`).FindString(dom); m == "" {
		t.Errorf("s2's tile is not coloured as needing help")
	}
	if strings.Contains(dom, "<img") || regexp.MustCompile(`<script>`).MatchString(dom) {
		t.Errorf("student text became markup:\n%s", dom)
	}
	if u := regexp.MustCompile(`data-updates="(\d+)"`).FindStringSubmatch(dom); u == nil || u[1] == "1" {
		t.Errorf("the change after the first send did not arrive as an update: %v", u)
	}
	if n := canary.Load(); n != 0 {
		t.Fatalf("the canary was fetched %d times: pane text ran as HTML", n)
	}
	// Control: the same text as HTML fetches the canary in this browser.
	br.Open(hs.URL + "/control?token=" + token)
	br.Wait(`document.querySelector("img") != null && document.querySelector("img").complete`, 30*time.Second)
	if ctl := br.HTML(); canary.Load() == 0 {
		t.Fatalf("control: the payload did not fetch the canary when put in as HTML, so the test proves nothing:\n%s", ctl)
	}
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Open(hs.URL + "/?token=" + token)
		br.Wait(`document.querySelectorAll("section.tile").length == 3`, 30*time.Second)
		br.Screenshot(filepath.Join(dir, "dashboard-standin.png"))
	}
}

// A tile in a real chromium shows the pane's last lines, where the newest
// output and the prompt are: with more lines than the tile holds, the last
// one is inside the tile and the first is cut off above it.
func TestBrowserTileShowsTheLastLines(t *testing.T) {
	bin := browsertest.Chromium(t)
	var text strings.Builder
	text.WriteString("\x1b[31mFIRST-LINE\x1b[0m\n")
	for i := 2; i < MaxLines; i++ {
		fmt.Fprintf(&text, "output line %d\n", i)
	}
	text.WriteString("\x1b[32mstudent$ LAST-LINE\x1b[0m\n")
	b := NewBoard([]string{"s1"})
	b.Update("s1", func(t *Tile) { t.Screen, t.State = Screen(text.String(), MaxLines, MaxCols), "answers" })
	hs := httptest.NewServer(NewServer(b, token, "lab"))
	t.Cleanup(hs.Close) // after the browser's own cleanup has ended its event stream

	br := browsertest.New(t, bin, 1400, 800)
	br.Open(hs.URL + "/?token=" + token)
	br.Wait(`document.querySelector("section.tile .f2") != null`, 30*time.Second)
	// Where each marked line is against its tile's screen: -1 above it,
	// 0 inside, 1 below.
	const where = `(function (sel) {
  const line = document.querySelector(sel).getBoundingClientRect();
  const box = document.querySelector("section.tile .screen").getBoundingClientRect();
  if (line.bottom <= box.top) return -1;
  if (line.top >= box.bottom) return 1;
  return line.top >= box.top - 1 && line.bottom <= box.bottom + 1 ? 0 : 2;
})`
	first := browsertest.Eval[int](br, where+`("section.tile .f1")`)
	last := browsertest.Eval[int](br, where+`("section.tile .f2")`)
	if last != 0 || first != -1 {
		t.Fatalf("the tile shows its last line at %d and its first at %d, want 0 (inside) and -1 (cut off above)\n%s", last, first, br.HTML())
	}
	// Control: the tile really is shorter than the pane's text, so one of
	// the two lines has to be cut off.
	if h := browsertest.Eval[bool](br, `(function () { const s = document.querySelector("section.tile .screen"); return s.firstElementChild.getBoundingClientRect().height > s.clientHeight + 10; })()`); !h {
		t.Fatal("control: the tile holds every line, so the test proves nothing")
	}
}
