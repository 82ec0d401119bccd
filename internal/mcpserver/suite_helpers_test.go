package mcpserver_test

// Helpers shared by the functional, adversarial, protocol, fault and audit
// tests: a fixture with the selection pointing at it, a "student" who types
// into the real tmux and Neovim, snapshots of the card repository, and
// sentinels (canary files, a secret outside the card) that must never be
// touched or leaked.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// fixture starts a fixture instance and selects it.
func fixture(t testing.TB) *testenv.Instance {
	t.Helper()
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	return in
}

// raw calls a tool and returns the whole result (nil on a protocol error).
func (s *session) raw(name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return s.c.CallTool(ctx, req)
}

// resultText joins the text contents of a result.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// readResource reads an MCP resource and returns its text.
func (s *session) readResource(uri string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := s.c.ReadResource(ctx, req)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Contents {
		if tc, ok := c.(mcp.TextResourceContents); ok {
			// Session text must say it is data, not instructions.
			if !strings.HasPrefix(uri, "stem://context") && (tc.Meta["untrusted"] != true || !strings.Contains(str(tc.Meta["notice"]), untrusted)) {
				return "", fmt.Errorf("resource %s: _meta %v lacks the untrusted-content notice", uri, tc.Meta)
			}
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

// get walks a decoded JSON value: get(m, "status", "buffers").
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// student acts in the fixture the way the student does: keys typed into
// tmux panes, commands in Neovim.
type student struct {
	t  testing.TB
	in *testenv.Instance
}

func studentOf(t testing.TB, in *testenv.Instance) student { return student{t, in} }

// pane returns the id of the first pane of a window ("edit", "shell").
func (st student) pane(window string) string {
	st.t.Helper()
	return strings.TrimSpace(st.in.Tmux(st.t, "display-message", "-p", "-t", "stem:"+window, "#{pane_id}"))
}

// run types a command line into a shell pane and presses Enter.
func (st student) run(pane, line string) {
	st.t.Helper()
	st.in.Tmux(st.t, "send-keys", "-t", pane, "-l", line)
	st.in.Tmux(st.t, "send-keys", "-t", pane, "Enter")
}

// capture is the pane's text (history and screen) as tmux itself shows it.
func (st student) capture(pane string) string {
	st.t.Helper()
	return st.in.Tmux(st.t, "capture-pane", "-p", "-J", "-t", pane, "-S", "-", "-E", "-")
}

// waitPane waits until the pane's text matches re.
func (st student) waitPane(pane, re string, timeout time.Duration) string {
	st.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		text := st.capture(pane)
		if rx.MatchString(text) {
			return text
		}
		if time.Now().After(deadline) {
			st.t.Fatalf("pane %s: %q did not appear within %v; pane text:\n%s", pane, re, timeout, lastLines(text, 30))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// barrier has the student type typed into a pane and waits for a line
// printed: keys that reached the pane earlier (a call sends them before it
// answers) have been read and run by then, so a check that nothing
// happened needs no pause. It returns the pane's text before the typed
// line, trailing blanks trimmed.
//
// It waits for the prompt after the printed line too: a capture taken
// before the prompt is drawn would miss a line the next barrier has.
func (st student) barrier(pane, typed, printed, prompt string) string {
	st.t.Helper()
	st.run(pane, typed)
	text := st.waitPane(pane, `(?m)^`+regexp.QuoteMeta(printed)+`\n`+prompt, 20*time.Second)
	return strings.TrimRight(text[:strings.LastIndex(text, typed)], " \n")
}

// shellBarrier is a barrier in a shell pane at its prompt.
func (st student) shellBarrier(pane string) string {
	n := barrierNumber()
	return st.barrier(pane, fmt.Sprintf("echo BARRIER-$((%d+1))", n), fmt.Sprintf("BARRIER-%d", n+1), `student\$`)
}

// gdbBarrier is a barrier in the student's gdb at its prompt.
func (st student) gdbBarrier(pane string) string {
	n := barrierNumber()
	return st.barrier(pane, fmt.Sprintf(`printf "BARRIER-%%d\n", %d`, n), fmt.Sprintf("BARRIER-%d", n), `\(gdb\)`)
}

func barrierNumber() int {
	var b [3]byte
	rand.Read(b[:])
	return int(b[0])<<16 | int(b[1])<<8 | int(b[2])
}

// unchanged reports whether a pane's text before a barrier is its text
// when captured as before.
func unchanged(before, now string) bool { return strings.TrimRight(before, " \n") == now }

// waitPrompt waits for the fixture's prompt to be the last line of a pane.
func (st student) waitPrompt(pane string) {
	st.t.Helper()
	st.waitPane(pane, `student\$ *\n*$`, 15*time.Second)
}

// nvim is a direct RPC connection to the student's Neovim (what the
// student's own keystrokes could do, used to arrange and to check state).
func (st student) nvim() *gonvim.Nvim {
	st.t.Helper()
	v, err := gonvim.Dial(st.in.Dir.Nvim())
	if err != nil {
		st.t.Fatalf("dial the student's nvim: %v", err)
	}
	st.t.Cleanup(func() { v.Close() })
	return v
}

// lua runs Lua in the student's Neovim.
func (st student) lua(result any, code string, args ...any) {
	st.t.Helper()
	v := st.nvim()
	defer v.Close()
	if args == nil {
		args = []any{}
	}
	if err := v.ExecLua(code, result, args...); err != nil {
		st.t.Fatalf("lua in the student's nvim: %v\n%s", err, code)
	}
}

// buffers lists Neovim's buffers as "number name" lines (sorted).
func (st student) buffers() []string {
	st.t.Helper()
	var out []string
	st.lua(&out, `local r = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  r[#r+1] = b .. ' ' .. vim.api.nvim_buf_get_name(b) .. ' loaded=' .. tostring(vim.api.nvim_buf_is_loaded(b)) .. ' modified=' .. tostring(vim.api.nvim_buf_get_option(b, 'modified'))
end
return r`)
	sort.Strings(out)
	return out
}

// bufferText returns the lines of the buffer holding path ("" if none).
func (st student) bufferText(path string) (string, bool) {
	st.t.Helper()
	var res struct {
		Found bool   `msgpack:"found"`
		Text  string `msgpack:"text"`
	}
	st.lua(&res, `local p = ...
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  if vim.api.nvim_buf_get_name(b) == p and vim.api.nvim_buf_is_loaded(b) then
    return {found = true, text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, true), '\n')}
  end
end
return {found = false, text = ''}`, path)
	return res.Text, res.Found
}

// typeInNvim sends keys to the student's Neovim through tmux, as typed.
func (st student) typeInNvim(keys string) {
	st.t.Helper()
	p := st.pane("edit")
	st.in.Tmux(st.t, "send-keys", "-t", p, "-l", keys)
	st.in.Tmux(st.t, "send-keys", "-t", p, "Enter")
}

// nvimMode returns Neovim's mode.
func (st student) nvimMode() string {
	st.t.Helper()
	var m map[string]any
	st.lua(&m, `return vim.api.nvim_get_mode()`)
	s, _ := m["mode"].(string)
	return s
}

// snapshot records every file under root (without following symlinks):
// relative path -> kind, mode and content digest or link target.
type snapshot map[string]string

func takeSnapshot(t testing.TB, root string) snapshot {
	t.Helper()
	snap := snapshot{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			snap[rel] = "link -> " + target
		case fi.IsDir():
			snap[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			snap[rel] = fmt.Sprintf("file %v %x", fi.Mode().Perm(), sum[:8])
		default:
			snap[rel] = fmt.Sprintf("other %v", fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return snap
}

// diff describes how b differs from a ("" when equal).
func (a snapshot) diff(b snapshot) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "removed "+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("changed %s: %s -> %s", k, v, w))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "added "+k+" ("+b[k]+")")
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// sentinels are the traps of the adversarial tests: canary paths that a
// started process would create, and a secret outside the card repository
// that must never appear in any result.
type sentinels struct {
	Canaries []string // must never exist
	Secret   string   // the secret's text
	Outside  string   // directory outside the card holding the secret
	SecretAt string   // the secret file
}

func newSentinels(t testing.TB, in *testenv.Instance) *sentinels {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	outside := filepath.Join(filepath.Dir(in.Dirs.State), "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &sentinels{
		Secret:   "STEM-SECRET-" + tag,
		Outside:  outside,
		SecretAt: filepath.Join(outside, "secret.txt"),
		Canaries: []string{
			filepath.Join(in.Resolved.CardPath, "CANARY"),
			filepath.Join(in.Resolved.TaskDir, "CANARY"),
			filepath.Join(in.Dirs.Home, "CANARY"),
			"/tmp/stem-canary-" + tag,
		},
	}
	if err := os.WriteFile(s.SecretAt, []byte(s.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(s.Canaries[3]) })
	return s
}

// canary is the path hostile strings try to create.
func (s *sentinels) canary() string { return s.Canaries[3] }

// check fails if any canary exists or the secret appears in text.
func (s *sentinels) check(t testing.TB, what, text string) {
	t.Helper()
	for _, c := range s.Canaries {
		if _, err := os.Lstat(c); err == nil {
			t.Fatalf("%s: canary %s exists: a process was started", what, c)
		}
	}
	if strings.Contains(text, s.Secret) || strings.Contains(text, strings.TrimPrefix(s.Secret, "STEM-")) {
		t.Fatalf("%s: the secret from outside the card repository appears in a result:\n%s", what, clip(text, 2000))
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitUntil polls cond until it holds or the timeout ends.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// mustJSON re-encodes a value for messages and substring checks.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// makeTask runs make in the task directory of the card copy (as the
// student would in the shell), failing with make's output.
func makeTask(t testing.TB, in *testenv.Instance, args ...string) {
	t.Helper()
	testenv.Require(t, "gdb")
	needs.Program(t, "gcc", "gcc make")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = in.Resolved.TaskDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %v in %s: %v\n%s", args, cmd.Dir, err, out)
	}
}

// rawServer is stem-mcp on pipes, for tests that write bytes a well-behaved
// client never would.
type rawServer struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startRaw(t testing.TB, in *testenv.Instance, level string, extra ...string) *rawServer {
	t.Helper()
	cmd := exec.Command(stemMCP(t), append([]string{"serve", "--level", level}, extra...)...)
	cmd.Env = in.Env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &rawServer{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 4096), stderr: &lockedBuffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				r.lines <- strings.TrimRight(line, "\n")
			}
			if err != nil {
				close(r.lines)
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return r
}

// send writes raw bytes (a newline is not added).
func (r *rawServer) send(b []byte) {
	r.t.Helper()
	if _, err := r.stdin.Write(b); err != nil {
		r.t.Fatalf("write to stem-mcp: %v (stderr: %s)", err, r.stderr.String())
	}
}

// sendJSON writes one JSON-RPC message as a line.
func (r *rawServer) sendJSON(v any) {
	r.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(append(b, '\n'))
}

// next returns the next message the server writes, decoded.
func (r *rawServer) next(timeout time.Duration) map[string]any {
	r.t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			r.t.Fatalf("stem-mcp closed its output (stderr: %s)", r.stderr.String())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			r.t.Fatalf("stem-mcp wrote a line that is not JSON: %v\n%s", err, clip(line, 500))
		}
		return m
	case <-time.After(timeout):
		r.t.Fatalf("no message from stem-mcp within %v (stderr: %s)", timeout, r.stderr.String())
	}
	return nil
}

// reply waits for the response with the given id, skipping notifications.
func (r *rawServer) reply(id any, timeout time.Duration) map[string]any {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	want := mustJSON(id)
	for {
		m := r.next(time.Until(deadline))
		if _, isNote := m["method"]; isNote && m["id"] == nil {
			continue
		}
		if mustJSON(m["id"]) == want {
			return m
		}
		r.t.Fatalf("unexpected message while waiting for id %s: %s", want, clip(mustJSON(m), 500))
	}
}

// initialize performs the MCP handshake.
func (r *rawServer) initialize() {
	r.t.Helper()
	r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.LATEST_PROTOCOL_VERSION, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}}})
	if m := r.reply("init", 20*time.Second); m["result"] == nil {
		r.t.Fatalf("initialize: %s", mustJSON(m))
	}
	r.sendJSON(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// callTool sends tools/call and returns the reply.
func (r *rawServer) callTool(id any, name string, args any) map[string]any {
	r.t.Helper()
	r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	return r.reply(id, 60*time.Second)
}

// execCommand runs a program with a deadline and returns its output.
func execCommand(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
