package agent

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/sockets"
)

func TestSocketPathLimit(t *testing.T) {
	short := sockets.Dir{Path: "/run/user/1000/stem/0123abcd/0123456789/0123456789ab"}
	p, err := SocketPath(short, "a1b2c3")
	if err != nil || p != short.Path+"/a-a1b2c3.sock" {
		t.Fatalf("%q %v", p, err)
	}
	long := sockets.Dir{Path: "/" + strings.Repeat("d", 80) + "/stem/0123abcd/0123456789/0123456789ab"}
	if _, err := SocketPath(long, "a1b2c3"); err == nil || !strings.Contains(err.Error(), "shorter XDG_RUNTIME_DIR") {
		t.Fatalf("long path: %v", err)
	}
	// Every socket directory `up` accepts (sockets.CheckLengths) takes the
	// socket of an agent with an id the store hands out, at every length.
	st := agentstore.NewStore(sockets.Layout{Runtime: t.TempDir()}, t.TempDir())
	id, _, err := st.Create()
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for n := 1; n < sockets.MaxPath; n++ {
		d := sockets.Dir{Path: "/" + strings.Repeat("d", n)}
		if sockets.CheckLengths(d.Path) != nil {
			continue
		}
		accepted++
		if _, err := SocketPath(d, id); err != nil {
			t.Fatalf("a %d-byte directory passes sockets.CheckLengths but not agent %s's socket: %v", len(d.Path), id, err)
		}
	}
	if accepted == 0 {
		t.Fatal("no directory length accepted: the check proves nothing")
	}
}
