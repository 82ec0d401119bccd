package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/needs"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// syncBuffer is an io.Writer safe for the server's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// inProcess starts a server at level l on a fixture, with the programs
// dial runs replaced, and waits for its start-up verification.
func inProcess(t *testing.T, in *testenv.Instance, l Level, progs programs) (*Server, *syncBuffer) {
	t.Helper()
	d := in.Dirs
	log := &syncBuffer{}
	s, err := New(Options{Level: l, Dirs: &xdg.Dirs{Runtime: d.Runtime, State: d.State, Config: d.Config, Home: d.Home},
		Getenv: func(string) string { return "" }, ErrOut: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.progs = progs
	s.begin()
	<-s.started
	return s, log
}

// callTool runs a tool of s's level in process; it returns the result's
// fields (with the pane text as "text") or the error text.
func callTool(t *testing.T, s *Server, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	for _, d := range allTools() {
		if d.tool.Name != name || !d.at(s.opt.Level) {
			continue
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		res, err := s.call(context.Background(), d, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		if res.IsError {
			return nil, strings.Join(texts, "")
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(texts[0]), &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(texts) == 2 {
			out["text"] = texts[1]
		}
		return out, ""
	}
	t.Fatalf("no tool %s at %s", name, s.opt.Level)
	return nil, ""
}

func writeScript(t *testing.T, p, body string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTmuxVersionFallback: when the host's tmux reports another version
// than the student's server, dial runs the control client through
// `podman exec -i CID tmux` instead, and pane_capture works through it.
// The fixture's tmux server runs on the host, so the stand-in for podman
// checks the arguments it gets and runs the host's tmux with the rest.
func TestTmuxVersionFallback(t *testing.T) {
	realTmux := needs.Program(t, "tmux", "tmux")
	// A host tmux of another version: it answers -V, then would speak
	// another protocol.
	checkContainerTmux(t, "tmux versions differ", "0.9-old", func(dir string) string {
		return writeScript(t, filepath.Join(dir, "tmux"), `[ "$1" = -V ] && { echo "tmux 0.9-old"; exit 0; }
exec `+realTmux+` "$@"
`)
	})
}

// With no tmux on the host, stem-mcp runs the container's tmux client (the
// container always has one) instead of failing.
func TestNoHostTmuxFallback(t *testing.T) {
	checkContainerTmux(t, "no tmux client on this host", "", func(dir string) string { return filepath.Join(dir, "no-such-tmux") })
}

// checkContainerTmux gives stem-mcp the host tmux hostTmux makes and a
// podman stand-in that runs the real tmux for `exec -i CID tmux ...`, and
// checks that pane_capture works through the container's client and that
// the server log says why (logWant, and detail when not empty).
func checkContainerTmux(t *testing.T, logWant, detail string, hostTmux func(dir string) string) {
	t.Helper()
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	realTmux := needs.Program(t, "tmux", "tmux")
	dir := t.TempDir()
	calls := filepath.Join(dir, "podman-calls")
	podman := writeScript(t, filepath.Join(dir, "podman"), `printf '%s\n' "$*" >> `+calls+`
[ "$1" = exec ] && [ "$2" = -i ] && [ "$3" = "`+in.Record.ContainerID+`" ] && [ "$4" = tmux ] || { echo "unexpected podman call: $*" >&2; exit 125; }
shift 4
exec `+realTmux+` "$@"
`)
	in.Tmux(t, "send-keys", "-t", "stem:shell", "echo FALLBACK-$((6*7))", "Enter")
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))

	s, log := inProcess(t, in, Observe, programs{tmux: hostTmux(dir), podman: podman})
	var out map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		var etext string
		out, etext = callTool(t, s, "pane_capture", map[string]any{"pane": pane})
		if etext != "" {
			t.Fatalf("pane_capture through the container's tmux client: %s\nserver log:\n%s", etext, log.String())
		}
		if strings.Contains(str(out["text"]), "FALLBACK-42") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane_capture never showed the echo: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(log.String(), logWant) || !strings.Contains(log.String(), detail) {
		t.Errorf("server log does not say why it switched clients (%q):\n%s", logWant, log.String())
	}
	got, _ := os.ReadFile(calls)
	want := "exec -i " + in.Record.ContainerID + " tmux -u -N -S " + in.Dir.Tmux() + " -C attach-session -t =stem -f ignore-size"
	if !strings.Contains(string(got), "exec -i "+in.Record.ContainerID+" tmux -V\n") || !strings.Contains(string(got), want+"\n") {
		t.Errorf("podman calls:\n%s\nwant the version check and %q", got, want)
	}
	// The connection in use is the container's client.
	c := s.current()
	if c == nil || c.tmux.ServerVersion() == "" || c.tmux.Err() != nil {
		t.Fatalf("no live tmux connection after the fallback")
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
