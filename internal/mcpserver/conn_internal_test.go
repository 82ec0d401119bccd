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

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest/hostile"
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
		res, err := s.call(context.Background(), []toolDef{d}, req)
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

// TestTmuxVersionFallback: when the student's server speaks another tmux
// protocol version than stem's Go client, dial runs the control client
// through `podman exec -i CID tmux` instead, and pane_capture works
// through it. The fixture's tmux server runs on the host, so the real
// server's socket is moved aside, a stand-in that answers every client
// with MSG_VERSION takes t.sock, and the stand-in for podman checks the
// arguments it gets and runs the host's tmux on the real socket.
func TestTmuxVersionFallback(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	realTmux := needs.Program(t, "tmux", "tmux")
	in.Tmux(t, "send-keys", "-t", "stem:shell", "echo FALLBACK-$((6*7))", "Enter")
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))

	sock := in.Dir.Tmux()
	moved := filepath.Join(filepath.Dir(sock), "real.sock")
	if err := os.Rename(sock, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(moved, sock) })
	ln, err := hostile.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); os.Remove(sock) })
	go hostile.Serve(ln, hostile.Plan{Sequence: []string{"version"}})

	dir := t.TempDir()
	calls := filepath.Join(dir, "podman-calls")
	podman := writeScript(t, filepath.Join(dir, "podman"), `printf '%s\n' "$*" >> `+calls+`
[ "$1" = exec ] && [ "$2" = -i ] && [ "$3" = "`+in.Record.ContainerID+`" ] && [ "$4" = tmux ] || { echo "unexpected podman call: $*" >&2; exit 125; }
shift 4
for a; do shift; [ "$a" = "`+sock+`" ] && a="`+moved+`"; set -- "$@" "$a"; done
exec `+realTmux+` "$@"
`)
	s, log := inProcess(t, in, Observe, programs{podman: podman})
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
	if !strings.Contains(log.String(), "tmux versions differ") || !strings.Contains(log.String(), "protocol version mismatch (client 8, server 7)") {
		t.Errorf("server log does not say why it switched clients:\n%s", log.String())
	}
	got, _ := os.ReadFile(calls)
	want := "exec -i " + in.Record.ContainerID + " tmux -u -N -S " + sock + " -C attach-session -t =stem -f ignore-size"
	if !strings.Contains(string(got), "exec -i "+in.Record.ContainerID+" tmux -V\n") || !strings.Contains(string(got), want+"\n") {
		t.Errorf("podman calls:\n%s\nwant the version check and %q", got, want)
	}
	c := s.current()
	if c == nil {
		t.Fatalf("no live tmux connection after the fallback")
	}
	if tc, ok := c.tmux.(*tmux.Client); !ok || tc.ServerVersion() == "" || tc.Err() != nil {
		t.Fatalf("no live tmux connection after the fallback")
	}
}

// TestNoHostTmuxNeeded: stem-mcp talks to the student's tmux with no tmux
// program on PATH at all (its client is spoken in Go).
func TestNoHostTmuxNeeded(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	in.Tmux(t, "send-keys", "-t", "stem:shell", "echo NOTMUX-$((6*7))", "Enter")
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	t.Setenv("PATH", t.TempDir())
	s, log := inProcess(t, in, Observe, programs{podman: "/nonexistent/podman"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, etext := callTool(t, s, "pane_capture", map[string]any{"pane": pane})
		if etext != "" {
			t.Fatalf("pane_capture without a host tmux: %s\nserver log:\n%s", etext, log.String())
		}
		if strings.Contains(str(out["text"]), "NOTMUX-42") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane_capture never showed the echo: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
