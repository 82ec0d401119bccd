package class

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A side that answers nothing is ended as silent; the heartbeat pinged it
// meanwhile, with ids of its own.
func TestWatchEndsSilentSession(t *testing.T) {
	w, _, sent := pipes(t)
	go (&mcpSession{wire: w}).watch(context.Background(), 300*time.Millisecond)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(sent)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a silent side's session is still open")
	}
	if err := w.Err(); !errors.Is(err, errSilent) || !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("ended with %v", err)
	}
	if l := <-lines; !strings.Contains(l, `"method":"ping"`) || !strings.Contains(l, `"id":"beat-1"`) {
		t.Fatalf("the first thing sent: %s", l)
	}
}

// Every call slot taken by calls the student's side never answers (long
// waits, say) does not starve the heartbeat: a side that answers its
// pings keeps its session, while the control (the same side answering no
// ping) loses it.
func TestWatchPingsPastFullSlots(t *testing.T) {
	for _, answer := range []bool{true, false} {
		t.Run(fmt.Sprintf("answers=%v", answer), func(t *testing.T) {
			w, peer, sent := pipes(t)
			for i := range maxInFlight {
				go w.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(i + 1)), Method: "tools/call"})
			}
			go (&mcpSession{wire: w}).watch(context.Background(), 500*time.Millisecond)
			pings := make(chan struct{}, 64)
			go func() {
				sc := bufio.NewScanner(sent)
				for sc.Scan() {
					var m struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
					}
					if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method != "ping" {
						continue
					}
					pings <- struct{}{}
					if answer {
						fmt.Fprintf(peer, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
					}
				}
			}()
			for n := 0; n < 10; n++ {
				select {
				case <-pings:
				case <-w.done:
					if answer {
						t.Fatalf("a side answering its pings was ended after %d: %v", n, w.Err())
					}
					return
				case <-time.After(30 * time.Second):
					t.Fatalf("no ping past the full slots after %d", n)
				}
			}
			if !answer {
				t.Fatal("a side answering no ping kept its session through 10 of them")
			}
			if err := w.Err(); err != nil {
				t.Fatalf("ended: %v", err)
			}
		})
	}
}
