package class

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class/dashboard/browsertest"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/tcprelay/tcprelaytest"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// silentWithin is how long the test waits for a silent student's tile to
// say gone: well past the hub's 5 s heartbeat, well short of the 35 s a
// silent peer takes without it (session_events' 20 s wait plus the 15 s
// timeout). With STEM_CONTROL_NO_HEARTBEAT set the hub runs without the
// heartbeat (the control), and the wait fails.
const silentWithin = 20 * time.Second

// A student's machine goes silent while `stemctl class serve` streams to a
// real chromium: the relay between the teacher's ssh and s2's real sshd
// stops passing bytes without closing anything (a laptop closed, a cable
// pulled). s2's tile turns gone within seconds, saying the student stopped
// answering, while s1's tile stays live; when the relay forwards again s2
// is live again.
func TestClassServeStudentSilentMidStream(t *testing.T) {
	t.Parallel() // its own accounts, lab or class directories, daemons
	if testing.Short() {
		t.Skip("makes student accounts with rootless Podman, runs sshd and chromium")
	}
	chromium := browsertest.Chromium(t)
	testenv.RequireAccount(t)
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	srv := sshdtest.Start(t, "Match User "+student.Prefix+"*", "\tAuthorizedKeysFile .ssh/authorized_keys")
	relay := tcprelaytest.Start(t, "127.0.0.1:"+strconv.Itoa(srv.Port))
	teacherHome := t.TempDir()
	key, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(teacherHome, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	lab := newLab(t, []string{levels.Observe.String(), levels.Observe.String()}, bin, key.PublicLine)

	f, _, run := teacherClass(t, teacherHome, bin)
	// The relay's port presents the sshd's host key.
	known := filepath.Join(teacherHome, "known_hosts")
	kh := readFile(t, srv.KnownHosts)
	kh += strings.Replace(kh, fmt.Sprintf("]:%d ", srv.Port), fmt.Sprintf("]:%d ", relay.Port), 1)
	if err := os.WriteFile(known, []byte(kh), 0o600); err != nil {
		t.Fatal(err)
	}
	run("init", "lab", "--key", key.PrivatePath, "--ssh-option", "UserKnownHostsFile="+known,
		"--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR")
	typists := make([]*typist, len(lab))
	for i, st := range lab {
		port := srv.Port
		if i == 1 {
			port = relay.Port
		}
		run("add", "lab", st.s.Name+"@127.0.0.1", "--port", fmt.Sprint(port), "--as", fmt.Sprintf("s%d", i+1))
		typists[i] = newTypist(t, st.s)
		typists[i].line(t, fmt.Sprintf("echo PANE-s%d-$((6*7))", i+1))
	}

	silent := time.Duration(0)
	if os.Getenv("STEM_CONTROL_NO_HEARTBEAT") != "" {
		silent = -1
	}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(ctx, &ServeOptions{F: f, Class: "lab", Listen: "127.0.0.1:0", Every: 200 * time.Millisecond,
			Timeout: 15 * time.Second, Silent: silent, Ready: func(u string) { urls <- u }})
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
	const helpers = `(function(){
  window.tile = function(n){ const e = document.querySelector('section.tile[data-student="'+n+'"] pre'); return e ? e.textContent : ""; };
  window.tileEl = function(n){ return document.querySelector('section.tile[data-student="'+n+'"]'); };
  window.state = function(n){ const e = document.querySelector('section.tile[data-student="'+n+'"] .state'); return e ? e.textContent : ""; };
  return true; })()`
	browsertest.Eval[bool](br, helpers)
	br.Wait(`tile("s1").includes("PANE-s1-42") && state("s1") == "answers" && tile("s2").includes("PANE-s2-42") && state("s2") == "answers"`, 2*time.Minute)
	live := func(i int, word string, within time.Duration) {
		t.Helper()
		typists[i].line(t, fmt.Sprintf("echo %s-$((1+1))", word))
		br.Wait(fmt.Sprintf(`tile("s%d").includes("%s-2") && state("s%d") == "answers"`, i+1, word, i+1), within)
	}

	relay.Silence()
	br.Wait(`state("s2") == "gone" && tileEl("s2").classList.contains("gone") && tileEl("s2").textContent.includes("stopped answering")`, silentWithin)
	t.Logf("s2's tile: %s", browsertest.Eval[string](br, `tileEl("s2").querySelector(".foot").textContent`))
	live(0, "S1-WHILE-S2-SILENT", time.Minute)
	if got := browsertest.Eval[string](br, `state("s2")`); got != "gone" {
		t.Fatalf("s2, still silent, shows %q", got)
	}
	if dir := os.Getenv("STEM_ARTIFACTS"); dir != "" {
		br.Screenshot(filepath.Join(dir, "class-dashboard-silent.png"))
	}

	// The relay forwards again: the hub's next attempt gets through (one
	// under way meanwhile goes on with the bytes the relay held).
	relay.Forward()
	live(1, "S2-BACK", 2*time.Minute)
	live(0, "S1-AFTER", time.Minute)
}
