package tmux_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func dialErr(t *testing.T, opts tmux.Options) error {
	t.Helper()
	start := time.Now()
	c, err := tmux.Dial(testCtx(t, 15*time.Second), opts)
	if err == nil {
		c.Close()
		t.Fatalf("Dial(%+v) succeeded", opts)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial took %v to fail", d)
	}
	return err
}

func TestDialErrors(t *testing.T) {
	s := tmuxtest.Start(t)

	missing := filepath.Join(s.Dir, "nothing.sock")
	err := dialErr(t, tmux.Options{Socket: missing})
	if !errors.Is(err, tmux.ErrNoServer) || !errors.Is(err, tmux.ErrClosed) {
		t.Errorf("no server: %v", err)
	}
	// Dialing must never start a server of its own.
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dialing a missing socket created it: %v", err)
	}
	err = dialErr(t, tmux.Options{Socket: s.Socket, Session: "nope"})
	if !errors.Is(err, tmux.ErrNoSession) {
		t.Errorf("no session: %v", err)
	}
	err = dialErr(t, tmux.Options{Socket: s.Socket, Command: []string{"/nonexistent/tmux"}})
	if !strings.Contains(err.Error(), "Debian package tmux") {
		t.Errorf("missing binary: %v", err)
	}
	for _, bad := range []tmux.Options{
		{Socket: "relative.sock"},
		{Socket: "/" + strings.Repeat("x", 120)},
		{Socket: s.Socket, Session: "a:b"},
		{Socket: s.Socket, Session: "stem;kill-server"},
	} {
		if err := dialErr(t, bad); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("Dial(%+v): %v", bad, err)
		}
	}
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVersionMismatch(t *testing.T) {
	s := tmuxtest.Start(t)
	// A real tmux client behind a wrapper that claims another version:
	// the server is real, only `-V` differs.
	other := writeScript(t, s.Dir, "tmux-other", `[ "$1" = -V ] && { echo "tmux 9.9z"; exit 0; }; exec tmux "$@"`+"\n")
	err := dialErr(t, tmux.Options{Socket: s.Socket, Command: []string{other}})
	if !errors.Is(err, tmux.ErrVersionMismatch) || !strings.Contains(err.Error(), "9.9z") {
		t.Errorf("version mismatch: %v", err)
	}
	// Allowed explicitly, the same client works.
	c, err := tmux.Dial(testCtx(t, 10*time.Second), tmux.Options{Socket: s.Socket, Command: []string{other}, AllowVersionMismatch: true})
	if err != nil {
		t.Fatalf("AllowVersionMismatch: %v", err)
	}
	c.Close()

	// What an incompatible tmux client prints (client.c, MSG_VERSION);
	// reproduced by a script because only one tmux version is installed.
	proto := writeScript(t, s.Dir, "tmux-proto", `[ "$1" = -V ] && { echo "tmux 3.3a"; exit 0; }
echo "protocol version mismatch (client 8, server 7)" >&2; exit 1
`)
	err = dialErr(t, tmux.Options{Socket: s.Socket, Command: []string{proto}})
	if !errors.Is(err, tmux.ErrVersionMismatch) {
		t.Errorf("protocol mismatch: %v", err)
	}
}

// TestCommandPrefix: the client can be started through another program,
// as with ["podman", "exec", "-i", CID, "tmux"].
func TestCommandPrefix(t *testing.T) {
	s := tmuxtest.Start(t)
	c, err := tmux.Dial(testCtx(t, 10*time.Second), tmux.Options{Socket: s.Socket, Command: []string{"env", "--", "tmux"}})
	if err != nil {
		t.Fatalf("Dial through env: %v", err)
	}
	defer c.Close()
	v, err := c.Version(testCtx(t, 5*time.Second))
	if err != nil || v != c.ServerVersion() || v == "" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	if !strings.HasPrefix(c.SessionID(), "$") {
		t.Fatalf("SessionID = %q", c.SessionID())
	}
}

// TestServerID: clients of one server read the same id, the server's pid
// and start time; another server has another.
func TestServerID(t *testing.T) {
	s := tmuxtest.Start(t)
	a, b := s.Dial(t), s.Dial(t)
	want := strings.TrimSpace(s.Tmux(t, "display-message", "-p", "#{pid}-#{start_time}"))
	if a.ServerID() != want || b.ServerID() != want || !regexp.MustCompile(`^[0-9]+-[0-9]+$`).MatchString(want) {
		t.Fatalf("ServerID %q and %q, want %q", a.ServerID(), b.ServerID(), want)
	}
	if other := tmuxtest.Start(t).Dial(t).ServerID(); other == want {
		t.Fatalf("two servers, one id %q", other)
	}
}

func TestServerKilled(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	pane := shellWindow(t, s, c)
	sub, err := c.Subscribe("", 16)
	if err != nil {
		t.Fatal(err)
	}
	// A Wait in flight when the server dies must end too.
	waitErr := make(chan error, 1)
	go func() {
		_, err := c.Wait(testCtx(t, 30*time.Second), pane, tmux.WaitOptions{Quiet: time.Hour, Timeout: 20 * time.Second})
		waitErr <- err
	}()
	time.Sleep(100 * time.Millisecond)
	s.Kill(t)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not fire after kill-server")
	}
	if err := c.Err(); !errors.Is(err, tmux.ErrClosed) {
		t.Fatalf("Err = %v", err)
	}
	t.Logf("Err after kill-server: %v", c.Err())
	select {
	case err := <-waitErr:
		if !errors.Is(err, tmux.ErrClosed) {
			t.Errorf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still running after the server died")
	}
	// Every call fails fast with the same error.
	start := time.Now()
	if _, err := c.ListPanes(testCtx(t, 10*time.Second)); !errors.Is(err, tmux.ErrClosed) {
		t.Errorf("ListPanes: %v", err)
	}
	if _, err := c.Capture(testCtx(t, 10*time.Second), pane, tmux.CaptureOptions{}); !errors.Is(err, tmux.ErrClosed) {
		t.Errorf("Capture: %v", err)
	}
	if _, _, err := c.Run(testCtx(t, 10*time.Second), pane, "true"); !errors.Is(err, tmux.ErrClosed) {
		t.Errorf("Run: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("calls took %v to fail", d)
	}
	// Subscriptions end.
	for range sub.C() {
	}
	// A second subscription on a dead client is closed at once.
	sub2, _ := c.Subscribe("", 1)
	if _, ok := <-sub2.C(); ok {
		t.Error("subscription on a closed client delivered")
	}
}

func TestClose(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	c.Close()
	<-c.Done()
	if _, err := c.Version(testCtx(t, time.Second)); !errors.Is(err, tmux.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// Closing the client does not touch the server or the session.
	if out := s.Tmux(t, "list-sessions", "-F", "#{session_name}"); strings.TrimSpace(out) != tmuxtest.Session {
		t.Fatalf("sessions after Close: %q", out)
	}
	c.Close() // idempotent
}

// TestIgnoreSize: our client never resizes the student's windows.
func TestIgnoreSize(t *testing.T) {
	s := tmuxtest.Start(t, tmuxtest.Options{Width: 173, Height: 51})
	c := s.Dial(t)
	panes, err := c.ListPanes(testCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if panes[0].Width != 173 || panes[0].Height != 51 {
		t.Fatalf("pane size %dx%d after attach, want 173x51", panes[0].Width, panes[0].Height)
	}
}

func TestNotifications(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	all, _ := c.Subscribe("", 256)
	np, err := c.NewWindow(testCtx(t, 5*time.Second), tmux.NewWindowOptions{Name: "w", Argv: []string{"sh", "-c", "stty -echo; read x; printf 'x\\ty\\\\z\\n'; sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := c.Subscribe(np.Pane, 256)
	time.Sleep(100 * time.Millisecond) // stty has run
	if err := c.SendKeys(testCtx(t, 5*time.Second), np.Pane, []tmux.Key{{Name: "Enter"}}); err != nil {
		t.Fatal(err)
	}
	var sawAdd bool
	var data []byte
	deadline := time.After(5 * time.Second)
	for !sawAdd || !bytes.Contains(data, []byte("x\ty\\z\r\n")) {
		select {
		case n := <-all.C():
			if n.Kind == "window-add" && n.Window == np.Window {
				sawAdd = true
			}
		case n := <-mine.C():
			if n.Pane != np.Pane {
				t.Fatalf("pane subscription got %+v", n)
			}
			data = append(data, n.Data...)
		case <-deadline:
			t.Fatalf("window-add %v, output %q", sawAdd, data)
		}
	}
	mine.Close()
	mine.Close()
	if _, ok := <-mine.C(); ok {
		t.Fatal("closed subscription delivered")
	}
}

// TestSlowSubscriber: a subscriber that never reads loses notifications,
// learns how many, and does not stall the connection.
func TestSlowSubscriber(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	slow, _ := c.Subscribe("", 1)
	np, err := c.NewWindow(testCtx(t, 5*time.Second), tmux.NewWindowOptions{Argv: []string{"sh", "-c", "seq 1 200000; echo FLOOD-DONE; sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	waitText(t, c, np.Pane, "FLOOD-DONE")
	// The connection still answers promptly.
	start := time.Now()
	if _, err := c.Capture(testCtx(t, 5*time.Second), np.Pane, tmux.CaptureOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("capture after flood took %v", d)
	}
	if slow.Lost() == 0 {
		t.Fatal("a subscriber with a buffer of 1 lost nothing during a flood")
	}
	<-slow.C() // the one buffered
	// Produce one more notification; it reports what was dropped.
	if err := c.SelectWindow(testCtx(t, 5*time.Second), np.Window); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-slow.C():
		if n.Dropped == 0 {
			t.Errorf("next notification %q says nothing was dropped (Lost %d)", n.Kind, slow.Lost())
		}
		t.Logf("lost %d notifications; next one reports %d dropped", slow.Lost(), n.Dropped)
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after the flood")
	}
}

// TestBinaryOutput: every byte value, in a large stream, arrives intact
// through %output decoding.
func TestBinaryOutput(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	var want []byte
	for len(want) < 1<<20 {
		for b := 0; b < 256; b++ {
			want = append(want, byte(b))
		}
	}
	file := filepath.Join(s.Dir, "bin")
	if err := os.WriteFile(file, want, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := "\x1b]133;stem-test-end\x07"
	pane := shellWindow(t, s, c)
	sub, _ := c.Subscribe(pane, 1<<16)
	// Raw tty so the kernel does not turn \n into \r\n; the script writes
	// the file, then a marker, then restores the tty.
	if err := c.SendKeys(testCtx(t, 5*time.Second), pane, []tmux.Key{
		{Text: fmt.Sprintf("stty raw -echo; sleep 0.2; cat %s; printf '\\033]133;stem-test-end\\007'; stty sane", file)},
		{Name: "Enter"},
	}); err != nil {
		t.Fatal(err)
	}
	var got []byte
	deadline := time.After(30 * time.Second)
	for !bytes.Contains(got, []byte(marker)) {
		select {
		case n, ok := <-sub.C():
			if !ok {
				t.Fatal("subscription ended")
			}
			if n.Dropped > 0 {
				t.Fatalf("dropped %d notifications with a 64k buffer", n.Dropped)
			}
			got = append(got, n.Data...)
		case <-deadline:
			t.Fatalf("got %d bytes, no end marker", len(got))
		}
	}
	i := bytes.Index(got, want[:256])
	if i < 0 {
		t.Fatalf("stream does not contain the data (got %d bytes)", len(got))
	}
	end := bytes.Index(got, []byte(marker))
	if !bytes.Equal(got[i:end], want) {
		t.Fatalf("binary data differs: got %d bytes, want %d", end-i, len(want))
	}
}
