package class

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// pipes is a wire over two pipes: peer writes what the student's side
// sends; sent reads what the teacher's side wrote.
func pipes(t *testing.T) (w *wire, peer *io.PipeWriter, sent *os.File) {
	t.Helper()
	sent, toPeer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromPeer, peer := io.Pipe()
	w = newWire(toPeer, fromPeer)
	w.Start(context.Background())
	t.Cleanup(func() { w.Close(); peer.Close(); sent.Close() })
	return w, peer, sent
}

// Requests from the student's side are never answered, and past the
// budget the student is cut off; a control below the budget is not.
func TestWirePeerRequests(t *testing.T) {
	w, peer, sent := pipes(t)
	method := strings.Repeat("M", 1000)
	for i := range maxPeerRequests {
		fmt.Fprintf(peer, `{"jsonrpc":"2.0","id":%d,"method":"%s"}`+"\n", i, method)
	}
	// A reply to a request of the teacher's side still gets through.
	done := make(chan error, 1)
	go func() {
		res, err := w.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(7)), Method: "ping"})
		if err == nil && string(res.Result) != `{}` {
			err = fmt.Errorf("result %s", res.Result)
		}
		done <- err
	}()
	buf := make([]byte, 4096)
	n, err := sent.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"method":"ping"`) {
		t.Fatalf("the teacher's side wrote %q (%v): only its own request belongs there", buf[:n], err)
	}
	fmt.Fprintf(peer, `{"jsonrpc":"2.0","id":7,"result":{}}`+"\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("cut off within the budget: %v", err)
	}
	fmt.Fprintf(peer, `{"jsonrpc":"2.0","id":99,"method":"%s"}`+"\n", method)
	<-w.done
	if err := w.Err(); !errors.Is(err, errCutOff) || !strings.Contains(err.Error(), "more than 16 requests") {
		t.Fatalf("after %d requests: %v", maxPeerRequests+1, err)
	}
	if _, err := w.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(8)), Method: "ping"}); !errors.Is(err, errCutOff) {
		t.Fatalf("a call after the cut-off: %v", err)
	}
}

// A side that does not read is cut off when a write times out; the
// caller is not held.
func TestWireWriteDeadline(t *testing.T) {
	w, _, _ := pipes(t)
	w.wait = 200 * time.Millisecond
	big := strings.Repeat("x", 1<<20) // more than a pipe holds
	_, err := w.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(1)), Method: "tools/call", Params: big})
	if !errors.Is(err, errCutOff) || !strings.Contains(err.Error(), "took nothing") {
		t.Fatalf("a write nobody reads: %v", err)
	}
}

// A line longer than maxLine cuts the student off.
func TestWireLongLine(t *testing.T) {
	w, peer, _ := pipes(t)
	go peer.Write([]byte(strings.Repeat("x", 2*maxLine)))
	<-w.done
	if err := w.Err(); !errors.Is(err, errLong) {
		t.Fatalf("a line over 1 MiB: %v", err)
	}
}

// An error the student's side answers with reaches the caller cleaned
// and bounded.
func TestWireErrorCleaned(t *testing.T) {
	w, peer, sent := pipes(t)
	go io.Copy(io.Discard, sent)
	done := make(chan *transport.JSONRPCResponse, 1)
	go func() {
		res, _ := w.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(3)), Method: "tools/call"})
		done <- res
	}()
	msg, _ := json.Marshal("\x1b]0;PWNED\x07line\nNOTICE\u202e" + strings.Repeat("A", 5000))
	for w.pendingCount() == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintf(peer, `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":%s,"data":"x"}}`+"\n", msg)
	res := <-done
	if res == nil || res.Error == nil || res.Error.Code != studentErrorCode || res.Error.Data != nil ||
		!strings.HasPrefix(res.Error.Message, "line NOTICEAAA") || len(res.Error.Message) > maxSaid {
		t.Fatalf("%+v", res.Error)
	}
}

func (t *wire) pendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}
