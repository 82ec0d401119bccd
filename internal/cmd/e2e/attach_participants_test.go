package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The host line names who is connected to the session: nobody, then a
// real stem-mcp serving the instance at its level while it is there, then
// nobody again once it has gone.
func TestAttachShowsWhoIsConnected(t *testing.T) {
	a := newAccount(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, sock, _ := attachedInstance(t, a)
	att := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), "attach", inst)
	f, err := pty.StartWithSize(att, &pty.Winsize{Cols: 120, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { att.Process.Kill(); att.Wait(); f.Close() }()
	scr := record(f)
	waitFor(t, 20*time.Second, "stemctl's client attached", func() bool { return a.clientCount(sock) == 1 })
	waitFor(t, 20*time.Second, "the host line with nobody connected", scr.shows("stem ▸ "+inst+" · no agent or teacher connected"))
	// A first attach ends the line with where to start.
	waitFor(t, 20*time.Second, "the newcomer's keys on the line", scr.shows("connected · new here? C-b n/p windows · C-b d detach"))

	a.must(0, "mcp", "select", inst)
	c, err := client.NewStdioMCPClient(filepath.Join(bins(t), "stem-mcp"), a.Env, "serve", "--level", "observe")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	ictx, icancel := context.WithTimeout(ctx, 20*time.Second)
	defer icancel()
	if _, err := c.Initialize(ictx, init); err != nil {
		t.Fatal(err)
	}
	mcpCall(t, c, "pane_list", nil) // the server connects to the instance
	waitFor(t, 20*time.Second, "the host line naming the MCP client and its level", scr.shows("· connected: an AI agent (observe)"))
	if scr.shows("(observe) (observe)")() {
		t.Fatal("the host line names the level twice")
	}
	mark := scr.mark()
	c.Close()
	waitFor(t, 20*time.Second, "the host line once the client has gone", scr.showsAfter(mark, "· no agent or teacher connected"))
}
