package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/lib/filestamp"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/workspace"
)

// What decides a read (the selection, the registry's record, the card's
// policy, the host's policy floor) is kept between calls only while the
// file it came from is unchanged: a rewrite between two calls is seen by
// the very next one, over stem-mcp's stdio transport with calls in a
// steady stream (the files settled, every cache filled). The control: the
// same calls answer before the rewrite.
func TestInProcessRewriteBetweenCallsIsSeen(t *testing.T) {
	t.Parallel()
	none := agentpolicy.Policy{MaxLevel: agentpolicy.CapNone, Edits: agentpolicy.EditsNone}
	for _, tc := range []struct {
		name    string
		files   func(in *testenv.Instance) []string
		rewrite func(t *testing.T, in *testenv.Instance)
	}{
		{"selection", func(in *testenv.Instance) []string { return nil },
			func(t *testing.T, in *testenv.Instance) {
				if err := os.Remove(in.Layout.Selected()); err != nil {
					t.Fatal(err)
				}
			}},
		{"registry record", func(in *testenv.Instance) []string { return []string{registryPath(in)} },
			func(t *testing.T, in *testenv.Instance) { in.RecordAgentPolicy(t, none) }},
		{"card policy", func(in *testenv.Instance) []string { return []string{manifestPath(in)} },
			func(t *testing.T, in *testenv.Instance) { in.SetAgentPolicy(t, `max_level = "none"`) }},
		{"host floor", func(in *testenv.Instance) []string { return []string{consentPath(t, in)} },
			func(t *testing.T, in *testenv.Instance) { in.SetPolicyFloor(t, none) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := mcptest.New(t, mcptest.Options{Level: mcpserver.Observe})
			c := h.Stdio(t, mcpserver.Observe)
			for _, f := range tc.files(h.Instance) {
				waitUntil(t, 10*time.Second, f+" settled", func() bool {
					st, ok := filestamp.Lstat(f)
					return ok && st.Settled(time.Now())
				})
			}
			for range 20 {
				if line := captureLine(t, c); failed(line) {
					t.Fatalf("control: a capture before the rewrite: %.300s", line)
				}
			}
			tc.rewrite(t, h.Instance)
			if line := captureLine(t, c); !failed(line) {
				t.Fatalf("the first capture after the rewrite was served: %.300s", line)
			}
		})
	}
}

func captureLine(t *testing.T, c *mcptest.Stdio) string {
	t.Helper()
	line, err := c.RoundTrip(`"method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"%1"}}`)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// failed reports whether a response is a tool error or a protocol error
// (a tool the policy removed is unknown to the client).
func failed(line string) bool {
	return strings.Contains(line, `"isError":true`) || strings.Contains(line, `"error":{`)
}

func registryPath(in *testenv.Instance) string {
	reg, err := registry.Open(in.Dirs.State)
	if err != nil {
		panic(err)
	}
	return reg.Path()
}

func manifestPath(in *testenv.Instance) string {
	return filepath.Join(in.Resolved.CardPath, workspace.ManifestName)
}

func consentPath(t *testing.T, in *testenv.Instance) string {
	st, err := consent.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	return st.Path()
}
