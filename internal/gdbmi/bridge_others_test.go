package gdbmi

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// rawClient is a g.sock connection that writes MI lines itself, as the
// student's editor (containers/files/nvim/lua/stem) does.
type rawClient struct {
	t     *testing.T
	conn  net.Conn
	lines chan string
}

func dialRaw(t *testing.T, sock string) *rawClient {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rc := &rawClient{t: t, conn: conn, lines: make(chan string, 1024)}
	go func() {
		defer close(rc.lines)
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			rc.lines <- sc.Text()
		}
	}()
	return rc
}

func (rc *rawClient) send(line string) {
	rc.t.Helper()
	if _, err := rc.conn.Write([]byte(line + "\n")); err != nil {
		rc.t.Fatal(err)
	}
}

// expect returns the first line starting with prefix, skipping others.
func (rc *rawClient) expect(prefix string, timeout time.Duration) string {
	rc.t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case l, ok := <-rc.lines:
			if !ok {
				rc.t.Fatalf("connection closed waiting for %q (saw %q)", prefix, seen)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			seen = append(seen, l)
		case <-deadline:
			rc.t.Fatalf("no line starting %q within %v (saw %q)", prefix, timeout, seen)
		}
	}
}

// waitNotify returns the next notification of class, skipping other events.
func waitNotify(t *testing.T, c *Client, class string, timeout time.Duration) Event {
	t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("event stream closed waiting for =%s (saw %v)", class, seen)
			}
			if ev.Kind == EventNotify && ev.Class == class {
				return ev
			}
			seen = append(seen, string(ev.Kind)+"/"+ev.Class)
		case <-deadline:
			t.Fatalf("no =%s within %v (saw %v)", class, timeout, seen)
		}
	}
}

// TestBreakpointChangesReachOtherClients: gdb does not announce a
// breakpoint change to the MI UI whose -break-* command made it, and every
// client shares that UI, so the bridge passes the change on: an agent's
// breakpoint reaches the editor and the editor's reaches the agent, as a
// student's `break` in the console reaches both. A name given with
// -stem-client labels the pane's note of a step that client made.
func TestBreakpointChangesReachOtherClients(t *testing.T) {
	work := buildNative(t)
	dir := sockDir(t)
	p := startPane(t, dir, work, "gdb", "-q", "-nx", "prog")
	sock := waitSocket(t, dir, p)
	p.waitFor(0, `\(gdb\) $`, 10*time.Second)
	agent := dial(t, sock)
	editor := dialRaw(t, sock)

	editor.send("1-stem-client editor")
	if l := editor.expect("1^", 5*time.Second); l != "1^done" {
		t.Fatalf("-stem-client: %s", l)
	}
	editor.send("2-stem-client Editor;rm")
	if l := editor.expect("2^", 5*time.Second); !strings.HasPrefix(l, "2^error") {
		t.Fatalf("-stem-client with a bad name: %s", l)
	}

	// The agent's breakpoint: a result for the agent, a notification for
	// the editor (with the same breakpoint), nothing more for the agent.
	r := exe(t, agent, BreakInsert(mustLoc(t, "add")))
	bk, _ := r.Get("bkpt")
	created := editor.expect("=breakpoint-created", 5*time.Second)
	rec, err := Parse(created)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := rec.Get("bkpt")
	if got.Str("number") != bk.Str("number") || got.Str("line") != "4" || got.Str("fullname") != bk.Str("fullname") {
		t.Fatalf("editor saw %s for the agent's %v", created, bk)
	}

	// The editor's breakpoint, disabled and deleted: the agent sees each.
	editor.send(`3-break-insert --source "prog.c" --line 13`)
	res3 := editor.expect("3^", 5*time.Second)
	r3, _ := Parse(res3)
	b3, _ := r3.Get("bkpt")
	num := b3.Str("number")
	if r3.Class != "done" || num == "" || b3.Str("line") != "13" {
		t.Fatalf("editor's -break-insert: %s", res3)
	}
	ev := waitNotify(t, agent, "breakpoint-created", 5*time.Second)
	if v, _ := ev.Record.Get("bkpt"); v.Str("number") != num || v.Str("line") != "13" {
		t.Fatalf("agent saw %v", ev.Record)
	}
	editor.send("4-break-disable " + num)
	editor.expect("4^done", 5*time.Second)
	ev = waitNotify(t, agent, "breakpoint-modified", 5*time.Second)
	if v, _ := ev.Record.Get("bkpt"); v.Str("number") != num || v.Str("enabled") != "n" {
		t.Fatalf("agent saw %v after -break-disable", ev.Record)
	}
	editor.send("5-break-delete " + num)
	editor.expect("5^done", 5*time.Second)
	ev = waitNotify(t, agent, "breakpoint-deleted", 5*time.Second)
	if ev.Record.Str("id") != num {
		t.Fatalf("agent saw %v after -break-delete", ev.Record)
	}
	// The editor's own changes did not come back to it as notifications.
	select {
	case l := <-editor.lines:
		t.Fatalf("the editor got %q for its own change", l)
	default:
	}

	// A step the editor makes is noted in the pane under its name.
	m := p.mark()
	p.typeText("run\r")
	editor.expect("*stopped", 15*time.Second)
	editor.send("6-exec-next")
	editor.expect("6^running", 5*time.Second)
	editor.expect("*stopped", 5*time.Second)
	p.waitFor(m, `\[editor stepped\] add \(\) at prog.c:5`, 5*time.Second)
	exe(t, agent, ExecNext())
	waitEvent(t, agent, EventStopped, 5*time.Second)
	p.waitFor(m, `\[agent stepped\] add \(\) at prog.c:6`, 5*time.Second)
}

func TestBreakNumbers(t *testing.T) {
	for _, c := range []struct {
		args  string
		first bool
		want  string
	}{
		{"3", false, "3"},
		{"1 2.1 4-6 2", false, "1,2,4,5,6"},
		{"--force 7 x > 2", true, "7"},
		{"7 12", true, "7"},
		{"a-b 3", true, ""},
		{"1-100000", false, ""},
		{"0 007", false, "7"},
		{"", false, ""},
	} {
		if got := strings.Join(breakNumbers(c.args, c.first), ","); got != c.want {
			t.Errorf("breakNumbers(%q, %v) = %q, want %q", c.args, c.first, got, c.want)
		}
	}
}
