package tmux_test

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/imsg"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// tmux 3.3a crashes (control_stop on a NULL control state) when a client
// goes away after MSG_IDENTIFY_FLAGS named it a control client and before
// MSG_IDENTIFY_DONE. A dial cut short by its context used to close the
// connection between the two. stem's dial sends its descriptors first and
// everything else in one write; a dial that stops after either stage must
// leave the student's server running. The control sends the flags alone
// and shows the crash is real on this tmux.
func TestIdentifyCutShortKeepsServerAlive(t *testing.T) {
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	pid, err := strconv.Atoi(strings.TrimSpace(srv.Tmux(t, "display-message", "-p", "#{pid}")))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(srv.Tmux(t, "display-message", "-p", "#{version}"))
	alive := func() bool { return syscall.Kill(pid, 0) == nil }
	dial := func() *net.UnixConn {
		t.Helper()
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: srv.Socket, Net: "unix"})
		if err != nil {
			if !alive() {
				t.Fatalf("the tmux server died: %v", err)
			}
			t.Fatalf("dial %s: %v", srv.Socket, err)
		}
		return c
	}
	identify := func(fdsOnly bool) {
		t.Helper()
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { inR.Close(); inW.Close(); outR.Close(); outW.Close() }()
		c := dial()
		defer c.Close() // gone at once, as a cancelled dial is
		if err := tmux.IdentifyForTest(c, "stem", inR, outW, fdsOnly); err != nil {
			t.Fatalf("identify (descriptors only: %v): %v", fdsOnly, err)
		}
	}
	for range 20 {
		identify(true)
		identify(false)
	}
	// The server has read every connection above (they were closed before
	// this one was made) by the time it answers a new client's command.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tmux.Dial(ctx, tmux.Options{Socket: srv.Socket, Session: "stem"})
	if err != nil {
		t.Fatalf("after 40 identifications cut short, a new client cannot attach (server alive: %v): %v", alive(), err)
	}
	if _, err := c.CommandForTest(ctx, "list-clients"); err != nil {
		t.Fatalf("after 40 identifications cut short: %v", err)
	}
	c.Close()
	if !alive() {
		t.Fatal("the tmux server died")
	}

	// Control: the flags without MSG_IDENTIFY_DONE, then gone.
	raw := dial()
	ic := imsg.NewConn(raw)
	flags := uint64(imsg.ClientControl | imsg.ClientNoStartServer | imsg.ClientUTF8)
	if err := ic.Send(imsg.MsgIdentifyFlags, nil, binary.NativeEndian.AppendUint32(nil, uint32(flags))); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	deadline := time.Now().Add(10 * time.Second)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case !alive():
		t.Logf("control: tmux %s died when a client sent its flags alone and left", version)
	case version == "3.3a":
		t.Fatal("control: tmux 3.3a survived a client that sent its flags alone and left: the test no longer shows the crash it guards against")
	default:
		t.Logf("control: tmux %s survives a half identification (fixed upstream); the test above still holds", version)
	}
}
