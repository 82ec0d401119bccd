package tmux

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseGuard(t *testing.T) {
	cases := []struct {
		line  string
		ok    bool
		kind  byte
		flags int
	}{
		{"%begin 1700000000 42 1", true, 'b', 1},
		{"%end 1700000000 42 0", true, 'e', 0},
		{"%error 1 2 1", true, 'x', 1},
		{"%begin 1 2", false, 0, 0},
		{"%begin 1 2 3 4", false, 0, 0},
		{"%begin 1  2 3", false, 0, 0},
		{"%begin 1 2 3 ", false, 0, 0},
		{"%begin a 2 3", false, 0, 0},
		{"%beginx 1 2 3", false, 0, 0},
		{" %end 1 2 1", false, 0, 0},
		{"%end 1 2 11", true, 'e', 0},
		{"%end 123456789012345678901 2 1", false, 0, 0},
	}
	for _, c := range cases {
		g, ok := parseGuard([]byte(c.line))
		if ok != c.ok || (ok && (g.kind != c.kind || g.flags != c.flags)) {
			t.Errorf("parseGuard(%q) = %+v, %v", c.line, g, ok)
		}
	}
}

// harness drives a demux with a queue of nonces.
type harness struct {
	d       *demux
	nonces  []string
	results []response
	notes   []string
}

func newHarness(nonces ...string) *harness {
	h := &harness{nonces: nonces}
	h.d = &demux{
		maxRegion: 1 << 20,
		head: func() (string, bool) {
			if len(h.nonces) == 0 {
				return "", false
			}
			return h.nonces[0], true
		},
		deliver: func(b []block, err error) {
			h.nonces = h.nonces[1:]
			h.results = append(h.results, response{blocks: b, err: err})
		},
		notify: func(l []byte) { h.notes = append(h.notes, string(l)) },
	}
	return h
}

func (h *harness) feed(t testing.TB, stream string) {
	t.Helper()
	for _, l := range strings.Split(stream, "\n") {
		if err := h.d.feed([]byte(l)); err != nil {
			t.Fatalf("feed %q: %v", l, err)
		}
	}
}

func texts(bs []block) []string {
	var out []string
	for _, b := range bs {
		s := b.text()
		if b.failed {
			s = "ERR:" + s
		}
		out = append(out, s)
	}
	return out
}

func TestDemuxBasic(t *testing.T) {
	h := newHarness("stem-n1", "stem-n2")
	h.feed(t, strings.Join([]string{
		"%begin 9 1 0", "%end 9 1 0", // attach-session: not ours
		"%session-changed $0 stem",
		"%output %1 before",
		"%begin 9 2 1", "a", "b", "%end 9 2 1",
		"%output %1 inside",
		"%begin 9 3 1", "%end 9 3 1",
		"%begin 9 4 1", "stem-n1", "%end 9 4 1",
		"%begin 9 5 1", "can't find pane: %7", "%error 9 5 1",
		"%begin 9 6 1", "stem-n2", "%end 9 6 1",
		"%exit",
	}, "\n"))
	if len(h.results) != 2 {
		t.Fatalf("results = %+v", h.results)
	}
	if got := texts(h.results[0].blocks); fmt.Sprint(got) != "[a\nb ]" {
		t.Errorf("first = %q", got)
	}
	if got := texts(h.results[1].blocks); fmt.Sprint(got) != "[ERR:can't find pane: %7]" {
		t.Errorf("second = %q", got)
	}
	want := []string{"%session-changed $0 stem", "%output %1 before", "%output %1 inside", "%exit"}
	if fmt.Sprint(h.notes) != fmt.Sprint(want) {
		t.Errorf("notes = %q, want %q", h.notes, want)
	}
}

// TestDemuxForgedGuards: the last command of a request prints untrusted
// lines that imitate every part of the protocol, including exact guards
// for its own block and the blocks around it.
func TestDemuxForgedGuards(t *testing.T) {
	forged := []string{
		"%end 9 3 1", "%error 9 3 1", "%end 9 2 1", "%begin 9 4 1", "stem-guess", "%end 9 4 1",
		"%output %1 forged", "%exit", "%begin 9 3 1", "plain", "",
	}
	h := newHarness("stem-real")
	stream := []string{"%begin 9 2 1", "trusted", "%end 9 2 1", "%begin 9 3 1"}
	stream = append(stream, forged...)
	stream = append(stream, "%end 9 3 1", "%output %1 real", "%begin 9 4 1", "stem-real", "%end 9 4 1")
	h.feed(t, strings.Join(stream, "\n"))
	if len(h.results) != 1 || h.results[0].err != nil {
		t.Fatalf("results = %+v", h.results)
	}
	got := texts(h.results[0].blocks)
	if len(got) != 2 || got[0] != "trusted" || got[1] != strings.Join(forged, "\n") {
		t.Fatalf("blocks = %q", got)
	}
	if fmt.Sprint(h.notes) != "[%output %1 real]" {
		t.Fatalf("notes = %q", h.notes)
	}
}

func TestDemuxAttachError(t *testing.T) {
	h := newHarness()
	h.feed(t, "%begin 9 1 0\ncan't find session: =nope\n%error 9 1 0\n%exit")
	if h.d.lastError != "can't find session: =nope" {
		t.Fatalf("lastError = %q", h.d.lastError)
	}
}

func TestDemuxLimit(t *testing.T) {
	h := newHarness("stem-x")
	h.d.maxRegion = 100
	h.d.feed([]byte("%begin 1 1 1"))
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		err = h.d.feed([]byte("0123456789"))
	}
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzDemux feeds arbitrary untrusted lines as the output of the last
// command of a request, framed exactly as tmux frames it, and checks that
// the response is exactly those lines, every time.
func FuzzDemux(f *testing.F) {
	f.Add("plain\nlines", "%end 1 2 1\n%begin 1 3 1\nstem-00\n%end 1 3 1", false)
	f.Add("%output %0 x\n%exit\n%error 1 2 1", "", true)
	f.Add("", "\n\n%begin 1 1 0\n%end 1 1 0", false)
	f.Fuzz(func(t *testing.T, content, noise string, fail bool) {
		if strings.ContainsAny(content+noise, "\r\x00") {
			return
		}
		// Fresh random nonces, as exec makes them: the content cannot
		// know them.
		n0, n1 := newNonce(), newNonce()
		h := newHarness(n0, n1)
		var s []string
		// Notifications between requests (lines starting with %).
		for _, l := range strings.Split(noise, "\n") {
			if strings.HasPrefix(l, "%output ") {
				s = append(s, l)
			}
		}
		end := "%end"
		if fail {
			end = "%error"
		}
		s = append(s, "%begin 5 10 1", "first", "%end 5 10 1", "%begin 5 11 1", content, end+" 5 11 1",
			"%begin 5 12 1", n0, "%end 5 12 1")
		s = append(s, "%begin 5 13 1", content, end+" 5 13 1", "%begin 5 14 1", n1, "%end 5 14 1")
		for _, l := range s {
			for _, part := range strings.Split(l, "\n") {
				if err := h.d.feed([]byte(part)); err != nil {
					t.Fatalf("feed: %v", err)
				}
			}
		}
		if len(h.results) != 2 {
			t.Fatalf("%d results", len(h.results))
		}
		for i, r := range h.results {
			if r.err != nil {
				t.Fatalf("result %d: %v", i, r.err)
			}
			last := r.blocks[len(r.blocks)-1]
			if last.text() != content || last.failed != fail {
				t.Fatalf("result %d: last block %q failed=%v, want %q", i, last.text(), last.failed, content)
			}
		}
		for _, n := range h.notes {
			if !strings.HasPrefix(n, "%output ") {
				t.Fatalf("unexpected notification %q", n)
			}
		}
	})
}

// FuzzDemuxGarbage: any stream, no panic, bounded state.
func FuzzDemuxGarbage(f *testing.F) {
	f.Add([]byte("%begin 1 1 1\nstem-g\n%end 1 1 1\n%begin 1 2 1\n%end 1 2 1\n"))
	f.Add([]byte("%end 1 1 1\n%begin 1 1 0\n%output %1 \\033x\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		h := newHarness("stem-g", "stem-h")
		h.d.maxRegion = 1 << 16
		for _, l := range bytes.Split(stream, []byte("\n")) {
			if err := h.d.feed(l); err != nil {
				return
			}
			if h.d.regionSize > h.d.maxRegion {
				t.Fatal("region over its limit")
			}
		}
		for _, n := range h.notes {
			parseNotification([]byte(n))
		}
	})
}

// escapeOutput is tmux's %output encoding (control.c, control_append_data).
func escapeOutput(b []byte) []byte {
	var out []byte
	for _, c := range b {
		if c < ' ' || c == '\\' {
			out = append(out, fmt.Sprintf("\\%03o", c)...)
		} else {
			out = append(out, c)
		}
	}
	return out
}

func FuzzUnescapeOutput(f *testing.F) {
	f.Add([]byte("a\\b\x1b[31m\r\n\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := unescapeOutput(escapeOutput(b)); !bytes.Equal(got, b) {
			t.Fatalf("round trip %q -> %q", b, got)
		}
		unescapeOutput(b) // arbitrary input: no panic
	})
}

func TestParseNotification(t *testing.T) {
	cases := []struct {
		line string
		want Notification
	}{
		{`%output %3 a\015\012\134`, Notification{Kind: "output", Pane: "%3", Data: []byte("a\r\n\\")}},
		{`%extended-output %3 12 : hi`, Notification{Kind: "output", Pane: "%3", Data: []byte("hi")}},
		{`%window-add @4`, Notification{Kind: "window-add", Window: "@4", Args: "@4"}},
		{`%window-renamed @4 a b`, Notification{Kind: "window-renamed", Window: "@4", Args: "@4 a b"}},
		{`%window-pane-changed @4 %9`, Notification{Kind: "window-pane-changed", Window: "@4", Pane: "%9", Args: "@4 %9"}},
		{`%pane-mode-changed %2`, Notification{Kind: "pane-mode-changed", Pane: "%2", Args: "%2"}},
		{`%sessions-changed`, Notification{Kind: "sessions-changed"}},
		{`%exit server exited`, Notification{Kind: "exit", Args: "server exited"}},
		{`%window-add @x`, Notification{Kind: "window-add", Args: "@x"}},
	}
	for _, c := range cases {
		got := parseNotification([]byte(c.line))
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
			t.Errorf("parseNotification(%q) = %+v, want %+v", c.line, got, c.want)
		}
	}
}

func FuzzParseFramed(f *testing.F) {
	f.Add("a", "b\nc", "3:x")
	f.Add("", "\n", "%1\t")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		fields := [][]string{{a, b, c}, {c, a, b}}
		var s strings.Builder
		for i, rec := range fields {
			if i > 0 {
				s.WriteByte('\n')
			}
			for _, v := range rec {
				fmt.Fprintf(&s, "%d:%s", len(v), v)
			}
		}
		got, err := parseFramed(s.String(), 3)
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", fields) {
			t.Fatalf("parseFramed = %q, %v; want %q", got, err, fields)
		}
		parseFramed(a+b+c, 2) // arbitrary input: no panic
	})
}

func TestOSCScanner(t *testing.T) {
	stream := "x\x1b]133;A\x07y\x1b]133;D;1\x1b\\z\x1b]2;title\x07\x1b\x1b]133;C\x07\x1b]" + strings.Repeat("q", 300) + "\x07"
	var got []string
	var sc oscScanner
	for i := 0; i < len(stream); i++ {
		if p, ok := sc.step(stream[i]); ok {
			got = append(got, p)
		}
	}
	want := []string{"133;A", "133;D;1", "2;title", "133;C"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRunTrackerSplitMarks(t *testing.T) {
	tr := newRunTracker(1<<10, markKeys{testKey: true})
	k := testKey
	// Forged marks in the output (unkeyed, another key) neither end the
	// command nor set its status.
	stream := mk("stem-probe;0;emacs;0", k) + "ls\r\n" + mk("C", k) + "out\r\n\x1b]133;D;0\x07" + mk("D;9", "fedcba9876543210") +
		"put\r\n" + mk("D;3", k) + mk("A", k) + "stem$ "
	tr.feed([]byte(stream[:10]))
	tr.arm()
	// Byte-at-a-time delivery: marks split across %output lines.
	for i := 10; i < len(stream); i++ {
		tr.feed([]byte{stream[i]})
	}
	s := tr.snapshot()
	if !s.probed || s.probeLen != 0 || s.keymap != "emacs" || !s.started || !s.finished || s.status != 3 {
		t.Fatalf("state = %+v", s)
	}
	if !bytes.HasPrefix(s.out, []byte("out\r\n")) || !bytes.HasSuffix(s.out, []byte("put\r\n")) {
		t.Fatalf("out = %q", s.out)
	}
	// A probe answer with a foreign key is not an answer.
	tr2 := newRunTracker(1<<10, markKeys{testKey: true})
	tr2.feed([]byte("\x1b]133;stem-probe;0;emacs;0\x07" + mk("stem-probe;0;emacs;0", "fedcba9876543210")))
	if tr2.snapshot().probed {
		t.Fatal("a forged probe answer counted")
	}
}

func TestRunTrackerCap(t *testing.T) {
	tr := newRunTracker(100, markKeys{testKey: true})
	tr.arm()
	tr.feed([]byte(mk("C", testKey)))
	for i := 0; i < 1000; i++ {
		tr.feed([]byte(fmt.Sprintf("line %d\r\n", i)))
	}
	tr.feed([]byte(mk("D;0", testKey)))
	s := tr.snapshot()
	if !s.truncated || len(s.out) > 200 || !bytes.HasSuffix(s.out, []byte("line 999\r\n")) {
		t.Fatalf("truncated=%v len=%d tail=%q", s.truncated, len(s.out), s.out)
	}
}

// TestRunTrackerLateKey: a probe answer from a shell whose key was not yet
// listed counts once the re-read keys list it, and not otherwise; an
// answer without a key marks an old integration.
func TestRunTrackerLateKey(t *testing.T) {
	tr := newRunTracker(1<<10, nil)
	tr.feed([]byte(mk("stem-probe;0;emacs;0", testKey)))
	if s := tr.snapshot(); s.probed || s.strayKey != testKey {
		t.Fatalf("before the keys: %+v", s)
	}
	tr.setKeys(markKeys{testKey: true})
	if s := tr.snapshot(); !s.probed || s.keymap != "emacs" || s.strayKey != "" {
		t.Fatalf("after the keys: %+v", s)
	}
	tr = newRunTracker(1<<10, markKeys{testKey: true})
	tr.feed([]byte(mk("stem-probe;0;emacs;0", "fedcba9876543210")))
	tr.setKeys(markKeys{testKey: true})
	if s := tr.snapshot(); s.probed || s.strayKey != "" {
		t.Fatalf("a forged key after the re-read: %+v", s)
	}
	tr.feed([]byte("\x1b]133;stem-probe;0;emacs;0\x07"))
	if s := tr.snapshot(); s.probed || !s.oldIntegration {
		t.Fatalf("an unkeyed answer: %+v", s)
	}
}
