package class

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class/dashboard/browsertest"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// killWhere SIGKILLs the processes of uid whose command line matches,
// and returns how many there were.
func killWhere(uid int, match func(cmdline string) bool) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc", e.Name()))
		if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && match(strings.ReplaceAll(string(cl), "\x00", " ")) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// Students gone while `stemctl class serve` streams to a real chromium:
// s2's gate (its stem-mcp) is SIGKILLed, and s3's connection drops with
// their machine (their sshd stops listening and its session processes
// die). Each one's tile says gone at once — s3's, who cannot be reached
// again, stays gone and goes first — while s1's tile stays live on the
// same stream, and s2, whose gate the hub starts again, is live again.
// Before, a gone student's tile kept its state ("answers") and its last
// screen, as if live, with only an error line under it.
func TestClassServeStudentGoneMidStream(t *testing.T) {
	t.Parallel() // its own accounts, lab or class directories, daemons
	if testing.Short() {
		t.Skip("makes student accounts with rootless Podman, runs sshd and chromium")
	}
	chromium := browsertest.Chromium(t)
	testenv.RequireAccount(t)
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	match := []string{"Match User " + student.Prefix + "*", "\tAuthorizedKeysFile .ssh/authorized_keys"}
	srv := sshdtest.Start(t, match...)
	leaving := sshdtest.Start(t, match...) // s3's machine
	teacherHome := t.TempDir()
	key, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(teacherHome, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	lab := newLab(t, []string{levels.Observe.String(), levels.Observe.String(), levels.Observe.String()}, bin, key.PublicLine)

	f, _, run := teacherClass(t, teacherHome, bin)
	// One known_hosts for both daemons: each has its own host key.
	known := filepath.Join(teacherHome, "known_hosts")
	kh := readFile(t, srv.KnownHosts) + readFile(t, leaving.KnownHosts)
	if err := os.WriteFile(known, []byte(kh), 0o600); err != nil {
		t.Fatal(err)
	}
	run("init", "lab", "--key", key.PrivatePath, "--ssh-option", "UserKnownHostsFile="+known,
		"--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR")
	typists := make([]*typist, n)
	for i, st := range lab {
		port := srv.Port
		if i == 2 {
			port = leaving.Port
		}
		run("add", "lab", st.s.Name+"@127.0.0.1", "--port", fmt.Sprint(port), "--as", fmt.Sprintf("s%d", i+1))
		typists[i] = newTypist(t, st.s)
		typists[i].line(t, fmt.Sprintf("echo PANE-s%d-$((6*7))", i+1))
	}

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

	br := browsertest.New(t, chromium, 1600, 1000)
	br.Open(url)
	// tile(n) is the text of n's screen; state(n) its state; every state
	// a tile shows is recorded, however briefly, in seen[n].
	const helpers = `(function(){
  window.tile = function(n){ const e = document.querySelector('section.tile[data-student="'+n+'"] pre'); return e ? e.textContent : ""; };
  window.tileEl = function(n){ return document.querySelector('section.tile[data-student="'+n+'"]'); };
  window.state = function(n){ const e = document.querySelector('section.tile[data-student="'+n+'"] .state'); return e ? e.textContent : ""; };
  window.seen = {};
  setInterval(function(){ ["s1","s2","s3"].forEach(function(n){ (window.seen[n] = window.seen[n] || {})[window.state(n)] = true; }); }, 10);
  return true; })()`
	browsertest.Eval[bool](br, helpers)
	var all []string
	for i := range lab {
		all = append(all, fmt.Sprintf(`tile("s%d").includes("PANE-s%d-42") && state("s%d") == "answers"`, i+1, i+1, i+1))
	}
	br.Wait(strings.Join(all, " && "), 2*time.Minute)
	live := func(i int, word string) {
		t.Helper()
		typists[i].line(t, fmt.Sprintf("echo %s-$((1+1))", word))
		br.Wait(fmt.Sprintf(`tile("s%d").includes("%s-2") && state("s%d") == "answers"`, i+1, word, i+1), 2*time.Minute)
	}

	// s2's gate dies. The hub connects again after its first backoff (1 s),
	// in which the tile is gone; then it is live again.
	gates := killWhere(lab[1].s.UID, func(cl string) bool { return strings.Contains(cl, "stem-mcp") })
	if gates == 0 {
		t.Fatal("s2 has no gate process to kill")
	}
	live(0, "S1-WHILE-S2-DIES")
	br.Wait(`seen.s2 && seen.s2["gone"] === true`, 2*time.Minute)
	live(1, "S2-BACK")

	// s3's machine goes: nothing listens any more, and the session's
	// processes die, which drops the connection.
	leaving.Stop()
	if k := killWhere(0, func(cl string) bool { return strings.HasPrefix(cl, "sshd: "+lab[2].s.Name) }) +
		killWhere(lab[2].s.UID, func(cl string) bool { return strings.HasPrefix(cl, "sshd: "+lab[2].s.Name) }); k == 0 {
		t.Fatal("no sshd session process of s3 to kill")
	}
	br.Wait(`state("s3") == "gone" && tileEl("s3").classList.contains("gone") && tileEl("s3").textContent.includes("gone since")`, 2*time.Minute)
	live(0, "S1-AFTER-S3")
	live(1, "S2-AFTER-S3")
	if got := browsertest.Eval[string](br, `state("s3")`); got != "gone" {
		t.Fatalf("s3, who cannot be reached, shows %q after the others' updates", got)
	}
	if first := browsertest.Eval[string](br, `document.querySelector("section.tile").dataset.student`); first != "s3" {
		t.Errorf("the first tile is %s, want s3 (gone, needs the teacher)", first)
	}
	if u := browsertest.Eval[string](br, `document.body.dataset.updates || ""`); u == "" {
		t.Errorf("the page counted no updates")
	}
	t.Logf("s3's tile: %s", browsertest.Eval[string](br, `tileEl("s3").querySelector(".foot").textContent`))
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "class-dashboard-gone.png"))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
