package class

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stem-edu/stem/internal/class/dashboard"
	"github.com/stem-edu/stem/internal/class/dashboard/browsertest"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// studentPage opens real students' pages in the browser: s1's (assist)
// shows its pane text, the debugger's state and its Neovim buffer, and a
// hint sent from it (confirmed first) is in s1's own audit log; s2's
// (observe) offers no action and its hint endpoint refuses.
func studentPage(t *testing.T, br *browsertest.Browser, url string, lab []labStudent) {
	t.Helper()
	audit := func(st labStudent) string {
		t.Helper()
		r, err := st.a.Run(nil, "audit", "show", "--json")
		if err != nil || r.Code != 0 {
			t.Fatalf("audit show as %s: %v %s", st.s.Name, err, r.Stderr)
		}
		return r.Stdout
	}
	start := time.Now()
	browsertest.Eval[bool](br, `location.hash = "#student=s1", true`)
	br.Wait(`!document.getElementById("student").hidden && document.getElementById("spanes").textContent.includes("PANE-s1-42")`, time.Minute)
	open := time.Since(start)
	br.Wait(`/no debugger running|debugger: /.test(document.getElementById("sgdb").textContent)`, time.Minute)
	// up asked the editor to open the task's file; the page shows it.
	br.Wait(`document.getElementById("hintpath").textContent.endsWith("t1/words.c") && document.querySelector('#snvim .ln[data-n="1"]') != null && !document.getElementById("hintform").hidden`, time.Minute)
	t.Logf("student page: pane text shown %v after the page was asked for (its fetch took %s ms)", open.Round(time.Millisecond),
		browsertest.Eval[string](br, `document.getElementById("student").dataset.openMs`))
	const note = "STEM-PAGE-HINT look at the loop bound"
	if strings.Contains(audit(lab[0]), note) || strings.Contains(audit(lab[0]), "nvim_hint") {
		t.Fatal("s1's audit log has a hint before any was sent")
	}
	if err := br.Do(30*time.Second, chromedp.Click(chromedp.CSS(`#snvim .ln[data-n="1"]`)), chromedp.SendKeys(chromedp.CSS(`#hinttext`), note),
		chromedp.Click(chromedp.CSS(`#hintform button`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`!document.getElementById("confirm").hidden && document.getElementById("confirmtext").textContent.includes("line: 1")`, 10*time.Second)
	if err := br.Do(10*time.Second, chromedp.Click(chromedp.CSS(`#confirmyes`))); err != nil {
		t.Fatal(err)
	}
	br.Wait(`/nvim_hint (sent|not sent)/.test(document.getElementById("actionresult").textContent)`, time.Minute)
	if res := browsertest.Eval[string](br, `document.getElementById("actionresult").textContent`); !strings.HasPrefix(res, "nvim_hint sent") {
		t.Fatalf("the hint: %s", res)
	}
	if log := audit(lab[0]); !strings.Contains(log, `"nvim_hint"`) {
		t.Fatalf("s1's audit log lacks the hint sent from the page:\n%s", log)
	}
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "class-student-page.png"))
	}

	// s2 (observe): no action on the page, and the endpoint refuses the
	// page's own kind of request.
	browsertest.Eval[bool](br, `location.hash = "#student=s2", true`)
	br.Wait(`document.getElementById("sname").textContent === "s2" && document.getElementById("spanes").textContent.includes("PANE-s2-42") &&
		document.getElementById("sactions").hidden && document.getElementById("readonly").textContent.includes("observe")`, time.Minute)
	before := audit(lab[1])
	req, _ := http.NewRequest("POST", strings.Replace(url, "/?token=", "/student/s2/hint?token=", 1),
		strings.NewReader(`{"path":"t1/words.c","line":1,"text":"no"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(dashboard.ActionHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "level observe") {
		t.Fatalf("a hint to observe-level s2: %d %s", resp.StatusCode, body)
	}
	if after := audit(lab[1]); strings.Count(after, "nvim_hint") != strings.Count(before, "nvim_hint") {
		t.Fatalf("the refused hint reached s2's gate:\n%s", after)
	}
	browsertest.Eval[bool](br, `location.hash = "", true`)
	br.Wait(`document.getElementById("student").hidden`, 10*time.Second)
}

// typist types into a real student's tmux, in a window of its own that it
// makes the active one (what a student does who opens a shell).
type typist struct {
	s    *student.Student
	cid  string
	pane string
}

func (ty *typist) tmux(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The container's own tmux on its own socket: a host tmux of another
	// version cannot matter.
	// Its socket is $STEM_INSTANCE_DIR/<cid12>/t.sock, as stem-init makes it.
	cmd := append([]string{"exec", ty.cid, "sh", "-c", `exec tmux -S "$STEM_INSTANCE_DIR/` + ty.cid[:min(12, len(ty.cid))] + `/t.sock" "$@"`, "tmux"}, args...)
	out, err := ty.s.Podman(ctx, cmd...)
	if err != nil {
		t.Fatalf("tmux %v as %s: %v\n%s", args, ty.s.Name, err, out)
	}
	return strings.TrimSpace(out)
}

func newTypist(t *testing.T, s *student.Student) *typist {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := s.Podman(ctx, "ps", "-q", "--filter", "label=io.stem.instance="+instance)
	if err != nil || strings.TrimSpace(id) == "" {
		t.Fatalf("the container of %s: %v %q", s.Name, err, id)
	}
	ty := &typist{s: s, cid: strings.TrimSpace(id)}
	ty.pane = ty.tmux(t, "new-window", "-t", "stem:", "-n", "dash", "-P", "-F", "#{pane_id}", "bash --norc --noprofile")
	return ty
}

func (ty *typist) line(t *testing.T, text string) {
	t.Helper()
	ty.tmux(t, "send-keys", "-t", ty.pane, "-l", text, ";", "send-keys", "-t", ty.pane, "Enter")
}

// `stemctl class serve` against real students behind a real sshd, seen in
// a real headless chromium: every tile shows its student's own pane text
// (typed into their real tmux), hostile output shows as text, a typed line
// reaches the tile, and a student whose instance goes down moves first,
// coloured.
func TestClassServeRealStudentsInBrowser(t *testing.T) {
	t.Parallel() // its own accounts, lab or class directories, daemons
	if testing.Short() {
		t.Skip("makes student accounts with rootless Podman, runs sshd and chromium")
	}
	chromium := browsertest.Chromium(t)
	testenv.RequireAccount(t)
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	srv := sshdtest.Start(t, "Match User "+student.Prefix+"*", "\tAuthorizedKeysFile .ssh/authorized_keys")
	teacherHome := t.TempDir()
	key, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(teacherHome, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	// Five students. s1's grant is assist (the student page's actions),
	// the others' observe.
	const n = 5
	lab := newLab(t, []string{levels.Assist.String(), levels.Observe.String(), levels.Observe.String(), levels.Observe.String(), levels.Observe.String()}, bin, key.PublicLine)

	f, out, run := teacherClass(t, teacherHome, bin)
	run("init", "lab", "--key", key.PrivatePath, "--ssh-option", "UserKnownHostsFile="+srv.KnownHosts,
		"--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR")
	typists := make([]*typist, n)
	for i, st := range lab {
		run("add", "lab", st.s.Name+"@127.0.0.1", "--port", fmt.Sprint(srv.Port), "--as", fmt.Sprintf("s%d", i+1))
		typists[i] = newTypist(t, st.s)
		// What the tile must show is the shell's output, not the typed line.
		typists[i].line(t, fmt.Sprintf("echo PANE-s%d-$((6*7))", i+1))
	}
	typists[0].line(t, `printf '\033[31m<script>fetch(1)</script><img src=/x onerror=alert(1)>\033[0m\033]0;title\007\n'`)

	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(ctx, &ServeOptions{F: f, Class: "lab", Listen: "127.0.0.1:0", Every: 200 * time.Millisecond,
			Timeout: 15 * time.Second, Ready: func(u string) { urls <- u }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := <-urls
	if !strings.Contains(out.String(), url) || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("the address is not printed: %q", out.String())
	}

	br := browsertest.New(t, chromium, 1600, 1000)
	br.Open(url)
	var conds []string
	for i := range lab {
		conds = append(conds, fmt.Sprintf(`tile("s%d").includes("PANE-s%d-42")`, i+1, i+1))
	}
	const tileJS = `(function(){ window.tile = function(n){ const e = document.querySelector('section.tile[data-student="'+n+'"] pre'); return e ? e.textContent : ""; }; return true; })()`
	browsertest.Eval[bool](br, tileJS)
	br.Wait(strings.Join(conds, " && "), 2*time.Minute)
	dom := br.HTML()
	if !strings.Contains(dom, `<span class="f1">&lt;script&gt;fetch(1)&lt;/script&gt;&lt;img src=/x onerror=alert(1)&gt;</span>`) {
		t.Errorf("s1's hostile output is not shown as red text:\n%s", dom)
	}
	if strings.Contains(dom, "<img") {
		t.Errorf("a student's output became markup")
	}
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "class-dashboard.png"))
	}

	// A typed line reaches the tile: the time from the keys sent (the
	// send-keys call returned, so podman exec is not counted) to the page
	// showing the output.
	var lat []time.Duration
	for i := range 5 {
		ty := typists[i%n]
		word := fmt.Sprintf("LAT%d", i)
		ty.line(t, fmt.Sprintf("echo %s-$((1+1))", word))
		start := time.Now()
		br.Wait(fmt.Sprintf(`tile("s%d").includes("%s-2")`, i%n+1, word), 10*time.Second)
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("keys sent -> tile updated in the browser: p50 %v, max %v (5 samples, --every 200ms)", lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))

	studentPage(t, br, url, lab)

	// s2's program crashes in a shell of theirs (a login shell, with the
	// shell integration the typists' plain bash lacks): the session event
	// reaches the hub, and s2's tile goes first, coloured, flagged crashed.
	crash := &typist{s: typists[1].s, cid: typists[1].cid}
	crash.pane = crash.tmux(t, "new-window", "-t", "stem:", "-n", "shell", "-P", "-F", "#{pane_id}", "bash -l")
	prompt := regexp.MustCompile(`[#$] *$`)
	for deadline := time.Now().Add(time.Minute); !prompt.MatchString(crash.tmux(t, "capture-pane", "-p", "-t", crash.pane)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no prompt in s2's login shell:\n%s", crash.tmux(t, "capture-pane", "-p", "-t", crash.pane))
		}
	}
	crash.line(t, `sh -c 'kill -SEGV $$'`)
	br.Wait(`(function(){ const f = document.querySelector("section.tile"); return f && f.dataset.student === "s2" && f.classList.contains("need-hi") && f.textContent.includes("crashed"); })()`, 2*time.Minute)

	// The last student's instance stops: its tile goes first, coloured as
	// needing help.
	if r, err := lab[n-1].a.Run(nil, "down", instance); err != nil || r.Code != 0 {
		t.Fatalf("down: %v %d %s", err, r.Code, r.Stderr)
	}
	br.Wait(fmt.Sprintf(`(function(){ const f = document.querySelector("section.tile"); return f && f.dataset.student === "s%d" && f.classList.contains("need-hi") && f.textContent.includes("instance-down"); })()`, n), 2*time.Minute)
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "class-dashboard-down.png"))
	}
}
